/*
 * walbuf.h — an SQLite VFS that gathers the writes of a commit to the WAL
 * file into one write.
 *
 * SQLite writes each WAL frame with two write() calls (24-byte header, then
 * the page), so a group commit of 20 labels (about 45 dirty pages) made ~90
 * system calls before its fsync. This VFS wraps the default one; for WAL
 * files only, contiguous writes are kept in a buffer (up to WALBUF_MAX) and
 * written with one call when something needs them on disk or visible: before
 * any sync, read, truncate, size query, file control, lock or close, and
 * when a write does not continue the buffered run. Every other file passes
 * straight through.
 *
 * Correctness rests on one SQLite property: in WAL mode with
 * synchronous=FULL, a commit syncs the WAL (xSync) after writing its frames
 * and before it publishes them in the wal-index, so no other connection can
 * look for a frame that is still in the buffer. Hence use this VFS only for
 * a connection that runs with synchronous=FULL and is the only writer.
 * Durability is unchanged: the sync that makes a commit durable is preceded
 * by the write of everything buffered.
 */
#ifndef LP_WALBUF_H
#define LP_WALBUF_H

/* Registers the VFS (once; thread-safe) and returns its name for
 * sqlite3_open_v2, or NULL if it could not be registered. */
const char *lp_walbuf_vfs(void);

#endif
