/* Commands run in the background by a test, their output kept in a
 * file. */
#ifndef HL_TEST_PROCESSES_H
#define HL_TEST_PROCESSES_H

#include <stddef.h>
#include <sys/types.h>

/* Start argv (argv[0] a path) with stdin from /dev/null and stdout and
 * stderr into the file at path (created or emptied). */
pid_t hl_spawn_logged(const char *const *argv, const char *path);

/* The exit status of pid (128 + N if signal N killed it), or -1 if it
 * did not end within timeout_ms: it is then killed. */
int hl_wait_exit(pid_t pid, int timeout_ms);

/* The file at path in out ("" when it cannot be read), cut to cap - 1
 * bytes. */
void hl_file_read(const char *path, char *out, size_t cap);

/* Waits timeout_ms for the file at path to contain text; fails the test,
 * showing the file, if it does not. */
void hl_expect_file_has(const char *path, const char *text, int timeout_ms);

#endif
