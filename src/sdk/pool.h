/* The thread pool's two doors for the SDK's work (docs/ARCHITECTURE.md §2 and §5).
 *
 * Decode work goes through one gate for every receiver: at most as many decode jobs are in the
 * thread pool at once as it has threads, the others wait here in arrival order. Work queued
 * beside it (exporters' encode, the sender's, processors') therefore waits behind at most one
 * round of decodes, never behind every request read from the sockets: what was accepted is sent
 * before more is taken in. A decode job goes on to up to 15 waiting decodes after its own
 * (chaining: no wake-up through the loop per request), but only while no work queued beside the
 * gate waits to start, and never to a decode while its pipelines are behind in sending; each
 * item's after_work runs as soon as its work is done. */
#ifndef PC_SDK_POOL_H
#define PC_SDK_POOL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

/* Same contract as uv_queue_work (loop thread; after_work gets status 0; req->loop is set).
 * behind, or NULL: set while what this decode feeds is behind in sending (the receiver's last
 * pc_consumer_admit for its pipelines answered PC_ADMIT_BEHIND, sdk/consumer.h); it must outlive
 * the work. While it is set no job goes on to this decode: it starts from the loop once a job
 * ends, so those pipelines' decodes do not run ahead of their sends while other pipelines' still
 * chain. */
void pc_decode_queue_work(uv_loop_t *loop, uv_work_t *req, uv_work_cb work, uv_after_work_cb after,
                          const atomic_bool *behind);

/* uv_queue_work for the SDK's own work beside the gate, counted while it waits (same
 * contract; req->data is the caller's in work and after_work). */
void pc_pool_queue_work(uv_loop_t *loop, uv_work_t *req, uv_work_cb work, uv_after_work_cb after);

#endif
