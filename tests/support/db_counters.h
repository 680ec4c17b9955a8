/*
 * db_counters.h — the counters of a database file (task_fill,
 * annotator_fill, campaign_fill, label_minutes, annotators.epsilon_spent)
 * recomputed in SQL from the labels and tasks, for tests of the writers
 * that keep them (the label writer, the task upload).
 * path is a SQLite file or a PostgreSQL URI (postgresql://..., postgres://...).
 */
#ifndef LP_DB_COUNTERS_H
#define LP_DB_COUNTERS_H

/* The number of counter rows that differ from what the rows give (0 when
 * every counter is exact; spends within 1e-9 relative), or -1 if the file
 * cannot be read. Prints each kind that differs to stderr. Opens its own
 * read-only connection, so it may run while a server has the file open. */
int db_counters_mismatch(const char *path);

/* The first column of the first row of sql on the file, as an integer; -1
 * if the file cannot be read or sql gives no row. */
long long db_scalar(const char *path, const char *sql);

#endif
