/* pelab/io.h — files: whole reads, atomic writes, directories, checksums.
 *
 * Every file pelab writes goes through pelab_atomic_*: the bytes go to a temporary file in the
 * same directory, are flushed and fsync'ed, then renamed over the destination (and the directory
 * fsync'ed), so a reader sees the old file or the new one, never a torn one.
 */
#ifndef PELAB_IO_H
#define PELAB_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Reads a whole file into a malloc'ed buffer with a NUL after the last byte. On failure returns
 * PELAB_ERR_RUNTIME with "PATH: reason". */
int pelab_read_file(const char *path, char **data, size_t *size);
/* The same for a file that must be a regular file (a data file): a FIFO, a device (a link to
 * /dev/zero) or a socket is refused at once, without blocking on it. */
int pelab_read_regular_file(const char *path, char **data, size_t *size);
/* The most bytes of a small file: 64 MiB. The largest of them is a tokenizer's vocabulary
 * (GPT-2's encoder.json: 1 MB); a run's config.json holds a few kB. Far above all of them, and
 * far below the memory a file named by mistake (a dataset, /dev/zero through a link) would take
 * before failing. */
#define PELAB_SMALL_FILE_MAX ((size_t)64 << 20)
/* The same for a small file, one that is not data: JSON (config.json, summary.json, a
 * dataset's info.json, --longrope-factors, --init-from's record, a compare's records) and a
 * tokenizer's vocabulary. Refused also when larger than PELAB_SMALL_FILE_MAX bytes ("PATH:
 * larger than 64 MiB, …"), before it is read. */
int pelab_read_small_file(const char *path, char **data, size_t *size);

struct pelab_atomic_file {
    FILE *f;       /* write here */
    char *path;    /* destination */
    char *tmp;     /* temporary sibling */
};
int pelab_atomic_open(struct pelab_atomic_file *af, const char *path);
/* Flushes, fsyncs, closes and renames into place. On any failure removes the temporary file and
 * returns PELAB_ERR_RUNTIME naming the path; the destination is untouched. */
int pelab_atomic_commit(struct pelab_atomic_file *af);
/* Closes and removes the temporary file; the destination is untouched. */
void pelab_atomic_abort(struct pelab_atomic_file *af);
/* For a program, called once before it writes: SIGINT, SIGTERM and SIGHUP remove the temporary
 * files of the atomic writes under way (up to 64 at once), then end the process as the signal
 * would have. A signal already ignored (nohup) stays ignored; a library caller with handlers of
 * its own does not call it. */
void pelab_atomic_remove_on_signals(void);
/* Convenience: the whole buffer, atomically. */
int pelab_write_file_atomic(const char *path, const void *data, size_t size);

/* mkdir -p. A symbolic link to nothing on the way is refused, naming it and its target. */
int pelab_mkdir_p(const char *path);
int pelab_file_exists(const char *path);
/* Whether `path` can be written later (checked before long work, so a bad output path fails
 * first): not a directory (PELAB_ERR_USAGE), and a temporary file can be made beside it
 * (PELAB_ERR_RUNTIME; made and removed). `what` names the option in the message ("--csv"). */
int pelab_check_output(const char *what, const char *path);

/* The process that holds a flock(2) on path (a file or a directory, as a training holds its run's):
 * its pid, read from /proc/locks (Linux); 0 when none does, or where that cannot be told. */
long pelab_flock_holder(const char *path);
/* Waits until no process holds a flock on path, then returns holding none itself; at once when
 * path cannot be opened. */
void pelab_flock_wait(const char *path);

/* CRC-32 (IEEE 802.3, the zlib polynomial); start with crc = 0. */
uint32_t pelab_crc32(uint32_t crc, const void *data, size_t size);

#endif
