/* Global back-pressure for every HTTP server: the memory limiter pauses socket reads (and
 * accepts) while the process is above a limiter's hard limit, and resumes them when it falls. */
#ifndef PC_HTTP_PAUSE_H
#define PC_HTTP_PAUSE_H

void pc_http_servers_pause(int paused);
int pc_http_servers_paused(void);
/* Servers register to hear about changes (loop thread). */
void pc_http_pause_register(void (*cb)(void *arg, int paused), void *arg);
void pc_http_pause_unregister(void *arg);

#endif
