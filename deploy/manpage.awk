# manpage.awk — turns a binary's manual-page records (its hidden --man
# option, printed from the same option tables as --help) into a man(7) page.
#
#   ldpref-server --man | awk -v version=0.4.0 -f deploy/manpage.awk > ldpref-server.1
#
# Records are lines "@tag<TAB>field<TAB>field":
#   @th        NAME  one-line description     .TH and the NAME section
#   @synopsis  text                           a SYNOPSIS line
#   @sh        TITLE                          a section
#   @ss        TITLE                          a subsection
#   @op        FLAG [ARG]  help               an option (flag bold, argument italic)
#   @tx        text                           a paragraph
# Any other line is printed as preformatted text (notes that --help prints
# after the option list). Every text is escaped here, the only place that
# knows roff: backslashes, a leading dot or quote, and '-' as \- so that
# option names render as the ASCII hyphen-minus and never break.
BEGIN { FS = "\t"; in_nf = 0; synopsis = 0 }

function esc(s) {
    gsub(/\\/, "\\e", s)
    gsub(/-/, "\\-", s)
    if (s ~ /^[.']/)
        s = "\\&" s
    return s
}
function end_nf() {
    if (in_nf) { print ".fi"; in_nf = 0 }
}

$1 == "@th" {
    name = $2
    print ".\\\" Generated from " name " --man: do not edit."
    print ".TH " toupper(esc(name)) " 1 \"\" \"ldpref " version "\" \"ldpref manual\""
    print ".nh"
    print ".ad l"
    print ".SH NAME"
    print esc(name) " \\- " esc($3)
    next
}
$1 == "@synopsis" {
    end_nf()
    if (!synopsis) { print ".SH SYNOPSIS"; synopsis = 1 } else print ".br"
    print esc($2)
    next
}
$1 == "@sh" { end_nf(); print ".SH " esc($2); next }
$1 == "@ss" { end_nf(); print ".SS"; print esc($2); next }
$1 == "@op" {
    end_nf()
    flag = $2; arg = ""
    sp = index(flag, " ")
    if (sp > 0) { arg = substr(flag, sp); flag = substr(flag, 1, sp - 1) }
    print ".TP"
    print "\\fB" esc(flag) "\\fR" (arg != "" ? "\\fI" esc(arg) "\\fR" : "")
    print esc($3)
    next
}
$1 == "@tx" { end_nf(); print ".PP"; print esc($2); next }
{
    if (!in_nf) { print ".PP"; print ".nf"; in_nf = 1 }
    print (length($0) ? esc($0) : "")
}
END { end_nf() }
