#include "core/base/auxname.h"

#include "core/base/alloc.h"

char *hl_aux_name_reserve(hl_aux_name *a, size_t need)
{
    a->len = 0;
    a->s = need <= sizeof a->buf ? a->buf : hl_malloc(need);
    return a->s;
}

void hl_aux_name_done(hl_aux_name *a)
{
    if (a->s != a->buf)
        hl_free(a->s);
    a->s = NULL;
}

void hl_aux_names_done(int n, hl_aux_name *names)
{
    for (int i = 0; i < n; i++)
        hl_aux_name_done(&names[i]);
}
