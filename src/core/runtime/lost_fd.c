/* hilock_client_lost_fd: word of lost leases as a descriptor to poll. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/base/error_detail.h"
#include "core/runtime/client_state.h"

int hilock_client_lost_fd(hilock_client *c, int *fd_out)
{
    if (fd_out != NULL)
        *fd_out = -1;
    if (c == NULL || fd_out == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    pthread_mutex_lock(&c->lock);
    int rc = HILOCK_OK;
    int fd = atomic_load(&c->lost_fd);
    if (c->closed) {
        rc = hl_fail(HILOCK_ECLOSED, "client closed");
    } else if (fd < 0) {
        fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0)
            rc = hl_fail(HILOCK_ENOMEM, "no descriptor for lost leases: %s",
                         strerror(errno));
        else
            atomic_store(&c->lost_fd, fd);
    }
    pthread_mutex_unlock(&c->lock);
    if (rc == HILOCK_OK)
        *fd_out = fd;
    return rc;
}

void hl_client_note_lost(hilock_client *c)
{
    int fd = atomic_load(&c->lost_fd);
    if (fd < 0)
        return;
    uint64_t one = 1;
    /* Only a counter at its limit refuses the write: it is readable
     * then all the same. */
    (void)!write(fd, &one, sizeof one);
}
