/*
 * safe_file.h: how ember creates every file and folder it writes (store
 * files, checkpoints, bundles, converted data, scores, metrics, plots).
 *
 * The attack this stops: anyone who can write into a folder that ember
 * writes into (the working directory, an SSD tier's folder, a checkpoint
 * root) plants a symbolic link at the name ember is about to write, and
 * ember, perhaps running as root, overwrites the link's target.  The rule
 * (docs/RELIABILITY.md, "Files ember writes"):
 *
 *   - a folder is opened once, following links in the path the user gave
 *     (that path is the user's choice), and every name below it is resolved
 *     relative to that descriptor, never through a path string again;
 *   - a new name is created with O_CREAT | O_EXCL | O_NOFOLLOW, or written
 *     as an unnamed O_TMPFILE that gets its name only when it is complete;
 *   - a name that exists as a link, folder, device or FIFO where a file is
 *     due (or as anything but a real folder where a folder is due) is
 *     refused by name, and so is anything at an output's temporary name;
 *   - a regular file at an output's name is replaced by rename only: its
 *     inode, and every other name it has, stays untouched; where the file
 *     system can swap two names, it waits at name.tmp until the new file is
 *     complete and durable, and comes back if anything fails before that;
 *   - every write, the flush, the fsync and the close are checked; a
 *     failure removes what this module created and reports the OS reason;
 *   - removing a tree never follows a link.
 *
 * Functions return EMBER_OK or an EMBER_* status with the message in err.
 */
#ifndef EMBER_CORE_SAFE_FILE_H
#define EMBER_CORE_SAFE_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A folder held open; path is kept for messages only. */
typedef struct safe_dir {
    int fd;
    char path[4096];
} safe_dir;

#define SAFE_DIR_INIT {-1, ""}

/* Opens the folder at path ("" is "."): EMBER_EIO naming it when it is
 * missing, not a folder, or cannot be opened. */
int safe_dir_open(safe_dir *d, const char *path, char *err, size_t len);

/* Opens the folder that holds path and copies path's last component to
 * name (EMBER_EINVAL for an empty path, one that ends in '/' or names "."
 * or ".."). */
int safe_dir_of(safe_dir *d, const char *path, char *name, size_t name_cap, char *err, size_t len);

void safe_dir_close(safe_dir *d);

/* fsync of the folder, so that renames in it survive a power cut (file
 * systems that refuse fsync on a folder are taken as they are). */
int safe_dir_sync(const safe_dir *d, char *err, size_t len);

/* "dir/name" for messages ("name" when dir is "."). */
const char *safe_path(const safe_dir *d, const char *name, char *buf, size_t cap);

/* What name is in d, links not followed. */
enum { SAFE_ABSENT = 0, SAFE_FILE, SAFE_DIR, SAFE_LINK, SAFE_OTHER, SAFE_ERROR = -1 };
int safe_kind(const safe_dir *d, const char *name);

/* EMBER_OK when name is absent or is a `want` (SAFE_FILE or SAFE_DIR);
 * else EMBER_EIO naming it and what it is. */
int safe_expect(const safe_dir *d, const char *name, int want, char *err, size_t len);

/* A folder that did not exist, created and opened (EMBER_EIO naming it
 * when the name exists). */
int safe_mkdir(const safe_dir *parent, const char *name, safe_dir *out, char *err, size_t len);

/* An existing real folder (never through a link), or, with create, a new
 * one where nothing is. */
int safe_subdir(const safe_dir *parent, const char *name, int create, safe_dir *out, char *err, size_t len);

/* Creates the folders of path that are missing (mkdir -p; the path is the
 * user's) and opens the last: EMBER_EIO naming the part that failed. */
int safe_mkdirs(safe_dir *d, const char *path, char *err, size_t len);

/* Renames d/from to d/to when nothing is at to (atomically where the file
 * system has RENAME_NOREPLACE): EMBER_EINVAL "... exists" when something
 * is, EMBER_EIO with the reason otherwise. */
int safe_rename_new(const safe_dir *d, const char *from, const char *to, char *err, size_t len);

/* Removes name and, if it is a real folder, everything below it; a link is
 * removed itself, never followed.  0, or -1 when something stayed. */
int safe_remove_tree(const safe_dir *parent, const char *name);

/* A new file created at name with O_EXCL | O_NOFOLLOW (flags: O_RDWR,
 * O_DIRECT...), mode before umask: the descriptor, or -1 with err naming
 * it (what exists there, or the OS reason). */
int safe_create(const safe_dir *d, const char *name, int flags, int mode, char *err, size_t len);

/* An output written whole, then published under its name. */
typedef struct safe_out {
    safe_dir dir;
    char name[256];
    char tmp[300];  /* the temporary name, when one is in use (else "") */
    int fd;
    int anon;       /* an unnamed O_TMPFILE, named at commit           */
    int err;        /* the first errno of a failed write               */
    int published;  /* named before its commit (safe_out_publish)      */
    int old_at_tmp; /* tmp names the file it replaced, kept until done */
    int64_t keep;   /* bytes copied from the file it replaces (append) */
    FILE *f;        /* safe_out_stdio's stream, closed at commit       */
} safe_out;

#define SAFE_OUT_INIT {.dir = SAFE_DIR_INIT, .fd = -1}
#define SAFE_OUT_APPEND 1 /* start from the bytes of the file now at name, if any */

/* Begins an output at dir/name (or at path): refuses a name that exists as
 * anything but a regular file, and anything at name.tmp.  Nothing is
 * visible at name until safe_out_commit. */
int safe_out_open(safe_out *o, const safe_dir *dir, const char *name, int flags, char *err, size_t len);
int safe_out_open_path(safe_out *o, const char *path, int flags, char *err, size_t len);

/* Writes all n bytes: 0, or -1 with the reason kept for the commit. */
int safe_out_write(safe_out *o, const void *p, int64_t n);

/* A stdio stream on the output (NULL when out of memory): its bytes go
 * through safe_out_write, so every failure, with its reason, is found by the
 * commit.  o must stay where it is while the stream is open. */
FILE *safe_out_stdio(safe_out *o);

/* Flushes the stdio stream: 0, or -1 with the reason kept (o->err). */
int safe_out_flush(safe_out *o);

/* Names the output now, before it is complete, for a log that is read
 * while it grows (the metrics of a run).  A later failure (abort, or a
 * failed commit) takes it back: to the bytes it began with when it was
 * opened with SAFE_OUT_APPEND, else the name is removed. */
int safe_out_publish(safe_out *o, char *err, size_t len);

/* Flushes, fsyncs and closes the file, publishes it at its name (over a
 * regular file only, by rename) and fsyncs the folder; on any failure the
 * output is removed and err gives the OS reason.  Frees o either way. */
int safe_out_commit(safe_out *o, char *err, size_t len);

/* Drops the output: nothing published, nothing left (an early-published
 * one is taken back).  NULL-safe, and safe on a committed output. */
void safe_out_abort(safe_out *o);

/* Tests: outputs take the named-temporary way (name.tmp, O_EXCL) even
 * where O_TMPFILE works, so both ways are tested on one machine. */
void safe_file_tmpfile_off(int off);

#endif
