/* Registry behind pc_http_servers_pause (loop thread only). */
#include "net/http_pause.h"

#include <stddef.h>

#define MAX_LISTENERS 64

static struct {
    void (*cb)(void *, int);
    void *arg;
} g_listeners[MAX_LISTENERS];
static int g_paused;

void pc_http_servers_pause(int paused)
{
    if (g_paused == !!paused) return;
    g_paused = !!paused;
    for (size_t i = 0; i < MAX_LISTENERS; i++)
        if (g_listeners[i].cb) g_listeners[i].cb(g_listeners[i].arg, g_paused);
}

int pc_http_servers_paused(void)
{
    return g_paused;
}

void pc_http_pause_register(void (*cb)(void *arg, int paused), void *arg)
{
    for (size_t i = 0; i < MAX_LISTENERS; i++)
        if (!g_listeners[i].cb) {
            g_listeners[i].cb = cb;
            g_listeners[i].arg = arg;
            return;
        }
}

void pc_http_pause_unregister(void *arg)
{
    for (size_t i = 0; i < MAX_LISTENERS; i++)
        if (g_listeners[i].arg == arg) g_listeners[i].cb = NULL, g_listeners[i].arg = NULL;
}
