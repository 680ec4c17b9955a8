/*
 * terminal.h — a real terminal for tests of full-screen programs: a detached
 * tmux session on its own socket, of a given size, running one program.
 * Tests send keys (tmux key names: "a", "q", "NPage", "Space", ...) and read
 * the screen as text (capture-pane).
 */
#ifndef LP_TERMINAL_H
#define LP_TERMINAL_H

typedef struct term_session {
    char sock[300]; /* the tmux server's socket (in the caller's directory) */
    int running;    /* 1 while the tmux server may be up */
} term_session;

/* 1 if tmux can be run. */
int term_available(void);

/*
 * Starts argv (argv[0] a path; run directly, no shell) in a cols x rows
 * terminal (UTF-8, TERM from tmux) with the "K=V" additions of env (NULL-
 * terminated, may be NULL). The socket goes in dir. When the program
 * exits, a line "[exited with status N]" follows its output and the pane
 * stays until term_stop(). Returns 0 or -1.
 */
int term_start(term_session *t, const char *dir, int cols, int rows, const char *const *env,
               const char *const *argv);

/* Sends one key (a tmux key name, or a literal character). 0 or -1. */
int term_key(term_session *t, const char *key);

/* Resizes the terminal (the program gets SIGWINCH). 0 or -1. */
int term_resize(term_session *t, int cols, int rows);

/* The screen as text, one line per row (malloc'd; the caller frees), or NULL. */
char *term_screen(term_session *t);

/* Polls the screen until it contains text and two captures in a row agree
 * (the program finished drawing), up to timeout_ms. Returns the last screen (malloc'd, caller
 * frees; NULL only when capture failed) and sets *found to 1 if the text was seen. */
char *term_wait_for(term_session *t, const char *text, int timeout_ms, int *found);

/* Waits (up to timeout_ms) for the program to exit; its exit status, or -1
 * (still running, or killed by a signal). */
int term_exit_status(term_session *t, int timeout_ms);

/* Writes the screen text to path. 0 or -1. */
int term_save(const char *screen, const char *path);

/* Kills the tmux server. Accepts a session that never started. */
void term_stop(term_session *t);

#endif
