/* tests/lib/tmpdir.h — a test program's scratch directory: made once under /tmp, named into,
 * watched for leftover temporary files, and removed with everything in it. */
#ifndef PELAB_TEST_TMPDIR_H
#define PELAB_TEST_TMPDIR_H

/* Makes /tmp/PREFIX-XXXXXX and returns its path, or NULL after saying why on stderr. */
const char *tmpdir_create(const char *prefix);

/* DIR/name in a rotating set of four buffers, so a few can be live at once. */
const char *tmpdir_path(const char *name);

/* Entries of `path` whose name contains ".tmp." (what an atomic write leaves if it goes wrong). */
int tmpdir_count_temps(const char *path);

/* Removes the directory tmpdir_create made, and everything in it. */
void tmpdir_remove(void);

#endif
