/* livegate.h — C client for livegated, the livegate daemon.
 * Licensed under the Apache License, Version 2.0.
 *
 * Usage:
 *
 *     char *err = NULL;
 *     lg_client *c = lg_connect(NULL, "my-app", &err);        // NULL: $LIVEGATE_SOCKET or the system socket
 *     int64_t tok = lg_observe_object(c, "notes", "n1", 0, on_change, NULL);
 *     struct pollfd p = { .fd = lg_fd(c), .events = POLLIN };
 *     for (;;) {                                              // on_change runs inside lg_dispatch
 *         if (!lg_has_pending(c) && poll(&p, 1, -1) <= 0) break;
 *         if (lg_dispatch(c) < 0) break;                      // the daemon closed the connection
 *     }
 *     lg_disconnect(c);
 *
 * Threads: a client is not thread-safe; use each lg_client from one thread at a time. The library starts no
 * thread and calls callbacks only from lg_dispatch.
 *
 * Requests (lg_observe_object, lg_invalidate, lg_update_object) block until the daemon answers. Notifications
 * that arrive meanwhile are kept and delivered by the next lg_dispatch, in order; since they are already
 * read, the descriptor may not be readable: check lg_has_pending before polling, as above.
 *
 * Ownership: the json_object passed to a callback belongs to the library and is valid only during the call
 * (take json_object_get() to keep it). Strings returned by lg_last_error() stay valid until the next call on
 * the same client. Error strings returned through `char **error` are the caller's to free().
 */
#ifndef LIVEGATE_H
#define LIVEGATE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct json_object;
typedef struct lg_client lg_client;

/* Called with each object.changed of a token: `params` is the notification's params object
 * {"token", "snapshot" (object or null), "dataStatus", "loadingStatus", "error"?}. */
typedef void (*lg_object_callback)(lg_client *client, int64_t token, struct json_object *params, void *userdata);

/* Connects and says hello. Returns NULL on failure, with a message in *error (free it) when error is not NULL. */
lg_client *lg_connect(const char *socket_path, const char *client_name, char **error);

/* The descriptor to poll for input (POLLIN). */
int lg_fd(const lg_client *client);

/* Observes an object. Returns the token (> 0), or -1 with lg_last_error() set. `once`: fire exactly once. */
int64_t lg_observe_object(lg_client *client, const char *collection, const char *id, int once,
                          lg_object_callback callback, void *userdata);

/* Ends a token. Returns 0, or -1 with lg_last_error() set. */
int lg_invalidate(lg_client *client, int64_t token);

/* Replaces an object's data (a JSON object, as text). Returns the new version, or -1 with lg_last_error(). */
int64_t lg_update_object(lg_client *client, const char *collection, const char *id, const char *data_json);

/* Reads what is available without blocking and delivers notifications. Returns how many callbacks ran,
 * or -1 when the connection closed or failed (see lg_last_error()). */
int lg_dispatch(lg_client *client);

/* Non-zero when notifications are already read and wait for lg_dispatch (poll would not report them). */
int lg_has_pending(const lg_client *client);

/* The last error's message, or "" when there was none. */
const char *lg_last_error(const lg_client *client);

/* The daemon's error code of the last failed request (JSON-RPC code), or 0. */
int lg_last_error_code(const lg_client *client);

/* Closes the connection and frees the client. */
void lg_disconnect(lg_client *client);

#ifdef __cplusplus
}
#endif
#endif
