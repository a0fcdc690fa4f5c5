#include "thread.h"

#include <signal.h>

int hl_thread_start(pthread_t *tid, bool detached, void *(*fn)(void *),
                    void *arg)
{
    /* The new thread inherits the mask of the one that creates it, so
     * there is no moment at which it can take a signal. */
    sigset_t all, old;
    pthread_attr_t attr;
    pthread_t ignored;
    int rc = pthread_attr_init(&attr);
    if (rc != 0)
        return rc;
    if (detached)
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(tid != NULL ? tid : &ignored, &attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return rc;
}
