// training/outputs.h: the files beside -o (the model, MODEL.state, MODEL.csv, MODEL.lock): named
// from the real path of -o, locked against a second ./train, and never replaced unless this
// project wrote them.
#ifndef ATTN_TRAINING_OUTPUTS_H
#define ATTN_TRAINING_OUTPUTS_H

#include <dirent.h>
#include <sys/file.h>
#include "checkpoint.h"

// The files a run writes: the model, its resume state and its log; and the lock that keeps a
// second ./train off them. All four are named from the real path of -o (real_output), so that
// two spellings of one file (a symbolic link, a linked directory) meet at one lock.
typedef struct {
    char *model, *state, *csv, *lock;
    int lock_fd;
} RunFiles;

static const char *held_lock; // the lock file this process holds, removed at exit

static void remove_held_lock(void) {
    if (held_lock) unlink(held_lock);
}

// Takes MODEL.lock for this process, or dies naming the process that holds it. The lock is
// an flock, which ends with the process however it ends, and the holder removes the file at
// exit; so the file is checked to be the one at the path after the lock is taken.
static void lock_outputs(RunFiles *f) {
    for (;;) {
        f->lock_fd = open(f->lock, O_RDWR | O_CREAT, 0644);
        if (f->lock_fd < 0) die("%s: cannot write there: %s", f->model, strerror(errno));
        if (flock(f->lock_fd, LOCK_EX | LOCK_NB)) {
            char pid[32] = "";
            ssize_t n = pread(f->lock_fd, pid, sizeof pid - 1, 0);
            pid[n > 0 ? n : 0] = 0;
            die("%s is being written by another ./train (pid %d); wait for it to finish, or choose another -o",
                f->model, atoi(pid));
        }
        struct stat held, now;
        if (!fstat(f->lock_fd, &held) && !stat(f->lock, &now) && held.st_ino == now.st_ino && held.st_dev == now.st_dev)
            break;
        close(f->lock_fd); // removed by the holder in between: take the new one
    }
    held_lock = f->lock;
    atexit(remove_held_lock);
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (ftruncate(f->lock_fd, 0) || pwrite(f->lock_fd, pid, (size_t)n, 0) != n)
        die("%s: cannot write the lock file: %s", f->lock, strerror(errno));
}

// Whether the file at path begins as attn.c writes it: the bytes want (len of them), or for a
// lock file (want NULL) a process id and a newline, or nothing. 1 also when path is absent.
static int written_by_us(const char *path, const char *want, size_t len) {
    char head[64] = {0};
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return errno == ENOENT;
    ssize_t n = read(fd, head, sizeof head - 1);
    close(fd);
    if (want) return n >= (ssize_t)len && !memcmp(head, want, len);
    size_t digits = strspn(head, "0123456789");
    return n == 0 || (digits > 0 && (ssize_t)digits + 1 == n && head[digits] == '\n');
}

// A run must not destroy what is already there: an existing model is continued (--resume) or
// replaced only when asked (--force), and only if it is an attn.c model; the same holds for the
// files beside it, which a file of the same name that attn.c did not write keeps off even with
// --force.
static void check_existing_files(const RunFiles *f, const Args *a) {
    struct {
        const char *path, *magic; // magic: how the file begins, both log headers' common start for the log
        size_t len;
        const char *what;
    } siblings[] = {
        {f->model, MODEL_MAGIC, 4, "an attn.c model"},
        {f->state, STATE_MAGIC, 8, "an attn.c resume state"},
        {f->csv, "step,train_loss,val_loss,", 25, "an attn.c training log"},
        {f->lock, NULL, 0, "an attn.c lock file"},
    };
    for (int i = 0; i < 4; i++) {
        if (!written_by_us(siblings[i].path, siblings[i].magic, siblings[i].len))
            die("%s exists and is not %s; refusing to replace it (choose another -o)", siblings[i].path,
                siblings[i].what);
    }
    if (a->resume || (a->force && access(f->model, F_OK) == 0)) return;
    if (access(f->model, F_OK)) {
        for (int i = 1; i < 3; i++)
            if (!a->force && access(siblings[i].path, F_OK) == 0)
                die("%s exists, left by an earlier run of -o %s; use --force to start over, or choose another -o",
                    siblings[i].path, f->model);
        return;
    }
    if (a->init && same_file(a->init, f->model))
        die("%s is also --init: training would write over it; give --force to train it in place, or another -o",
            f->model);
    long step = state_file_step(f->state);
    if (step >= 0)
        die("%s exists: %ld step%s of training; use --resume to continue, or --force to start over", f->model, step,
            plural(step));
    die("%s exists; use --init %s to train from it, or --force to start over", f->model, f->model);
}

// path, made relative to the working directory when it lies below it (messages stay short).
static char *relative_to_cwd(char *path) {
    char *cwd = getcwd(NULL, 0);
    size_t n = cwd ? strlen(cwd) : 0;
    if (cwd && n > 1 && !strncmp(path, cwd, n) && path[n] == '/') memmove(path, path + n + 1, strlen(path + n));
    free(cwd);
    return path;
}

// The file -o names, with every symbolic link resolved: the real path of its directory and, if
// -o is a link (to a file that may not exist yet), of the link's target, followed as the
// kernel does. Allocated.
static char *real_output(const char *typed) {
    char *path = strdup(typed);
    if (!path) die("out of memory");
    for (int hops = 0;; hops++) {
        size_t len = strlen(path);
        char *dir = xcalloc(len + 2, 1, "a file name");
        dir_of(path, dir, len + 2);
        const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
        char *real_dir = realpath(dir, NULL);
        int real_errno = errno, no_base = !*base;
        free(dir);
        if (!real_dir || no_base) free(path), free(real_dir); // before die, for LeakSanitizer (make test-asan)
        if (!real_dir) die("%s: cannot write there: %s", typed, strerror(real_errno));
        if (no_base) die("%s: is a directory, not a regular file; refusing to replace it", typed);
        size_t n = strlen(real_dir) + strlen(base) + 2;
        char *full = xcalloc(n, 1, "a file name");
        snprintf(full, n, "%s%s%s", real_dir, strcmp(real_dir, "/") ? "/" : "", base);
        free(path);
        struct stat st;
        if (lstat(full, &st) || !S_ISLNK(st.st_mode)) {
            free(real_dir);
            return relative_to_cwd(full);
        }
        char target[4096];
        ssize_t t = hops == 40 ? 0 : readlink(full, target, sizeof target - 1);
        int link_errno = errno;
        if (hops == 40 || t < 0) free(real_dir), free(full);
        if (hops == 40) die("%s: too many levels of symbolic links", typed);
        if (t < 0) die("%s: cannot read the link: %s", typed, strerror(link_errno));
        target[t] = 0;
        n = strlen(real_dir) + (size_t)t + 2;
        path = xcalloc(n, 1, "a file name");
        if (target[0] == '/') snprintf(path, n, "%s", target);
        else snprintf(path, n, "%s/%s", real_dir, target);
        free(real_dir);
        free(full);
    }
}

// Under the lock no other ./train writes these files, so the temporary files of theirs that a
// kill -9 or a second Ctrl-C left (write_atomic's NAME.tmp.XXXXXX, of the model, the state or
// the log) are stale: removed, said.
static void remove_stale_temporaries(const RunFiles *f) {
    size_t len = strlen(f->model) + 2;
    char *dir = xcalloc(len, 1, "a file name");
    dir_of(f->model, dir, len);
    const char *slash = strrchr(f->model, '/'), *base = slash ? slash + 1 : f->model;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t b = strlen(base), n = strlen(e->d_name);
        if (strncmp(e->d_name, base, b)) continue;
        const char *rest = e->d_name + b;
        if (!strncmp(rest, ".state", 6)) rest += 6;
        else if (!strncmp(rest, ".csv", 4)) rest += 4;
        if (strncmp(rest, ".tmp.", 5) || strlen(rest) != 11 || n != (size_t)(rest - e->d_name) + 11) continue;
        char *path = xcalloc(len + n + 2, 1, "a file name");
        snprintf(path, len + n + 2, "%s/%s", dir, e->d_name);
        struct stat st;
        if (!lstat(path, &st) && S_ISREG(st.st_mode) && !unlink(path))
            fprintf(stderr, "%s: note: removed %s, a temporary file left by a run that was stopped while writing\n",
                    prog, path);
        free(path);
    }
    if (d) closedir(d);
    free(dir);
}

// The run's files from -o, checked and locked before anything is read or written: none may be
// the corpus, which writing would destroy. (-o may equal --init with --force: the model is
// read whole before the first checkpoint.)
static RunFiles claim_outputs(const Args *a) {
    RunFiles f = {.model = real_output(a->out), .lock_fd = -1};
    size_t n = strlen(f.model) + sizeof ".state";
    f.state = xcalloc(n, 1, "a file name");
    f.csv = xcalloc(n, 1, "a file name");
    f.lock = xcalloc(n, 1, "a file name");
    snprintf(f.state, n, "%s.state", f.model);
    snprintf(f.csv, n, "%s.csv", f.model);
    snprintf(f.lock, n, "%s.lock", f.model);
    if (a->rank) return f; // rank 0 writes the files, and checks and locks them for the run
    const char *outputs[] = {f.model, f.state, f.csv, f.lock};
    char err[512];
    for (int i = 0; i < 4; i++) {
        if (same_file(outputs[i], a->data)) die("%s is the corpus (-d): writing it would destroy it", outputs[i]);
        if (check_output(outputs[i], err, sizeof err)) die("%s", err);
    }
    if (!written_by_us(f.lock, NULL, 0))
        die("%s exists and is not an attn.c lock file; refusing to replace it (choose another -o)", f.lock);
    lock_outputs(&f);
    check_existing_files(&f, a);
    remove_stale_temporaries(&f);
    return f;
}

// At the end of a run: the lock is let go and its file removed.
static void release_outputs(RunFiles *f) {
    remove_held_lock();
    held_lock = NULL;
    if (f->lock_fd >= 0) close(f->lock_fd);
    free(f->model);
    free(f->state);
    free(f->csv);
    free(f->lock);
}

#endif
