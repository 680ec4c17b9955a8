/*
 * label_stream.h — signed labels streamed at a real server by several
 * annotators at once, for attack tests that watch what becomes of labels
 * under storage faults: every acknowledged label id is kept, every refusal
 * is counted by its error name, and the server's export is checked
 * against what was acknowledged.
 */
#ifndef LP_LABEL_STREAM_H
#define LP_LABEL_STREAM_H

#include "raw_annotator.h"
#include "server_proc.h"

#include <stdint.h>

#define LABEL_STREAM_WRITERS 4
#define LABEL_STREAM_NAMES 8

typedef struct label_writer {
    raw_annotator ann;
    int64_t *tasks;        /* assigned to this annotator, labelled in order */
    int ntasks, next, cap; /* cap: the tasks this annotator may take in all */
    int64_t *acked;        /* ids of the labels acknowledged (201) */
    int nacked;
} label_writer;

typedef struct label_stream {
    const server_proc *srv;
    char campaign[32];
    char token[160]; /* the operator token (kept across restarts) */
    label_writer w[LABEL_STREAM_WRITERS];
    /* refusals of the last run, by error name ("" for a failed request) */
    struct {
        char name[48];
        int count;
    } refusals[LABEL_STREAM_NAMES];
    int refused; /* in the last run */
} label_stream;

/* Creates campaign (with LABEL_STREAM_WRITERS * tasks_per_writer tasks)
 * on srv with its first operator token, enrolls the annotators and has
 * each fetch tasks_per_writer tasks. Returns 0, or -1 with a failed check. */
int label_stream_setup(label_stream *ls, const server_proc *srv, const char *campaign,
                       int tasks_per_writer);

/* Every writer submits up to per_writer labels, one request at a time, in
 * parallel; with stop_at_refusal a writer stops at its first refusal. A
 * refused label's task is tried again by the next run. Returns the number
 * acknowledged in this run; the refusals are in ls->refusals. */
int label_stream_run(label_stream *ls, int per_writer, int stop_at_refusal);

/* How many refusals of the last run had this error name. */
int label_stream_refused_as(const label_stream *ls, const char *name);

/* Labels acknowledged so far, over all runs. */
int label_stream_acked(const label_stream *ls);

/* Exports the campaign: the number of acknowledged labels missing from it,
 * and in *stored the number of labels it holds; -1 if the export failed. */
int label_stream_missing(const label_stream *ls, int *stored);

void label_stream_free(label_stream *ls);

#endif
