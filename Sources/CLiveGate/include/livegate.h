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
 * Requests (lg_observe_*, lg_collection_page, lg_stream_*, lg_invalidate, lg_update_object) block until the daemon answers. Notifications
 * that arrive meanwhile are kept and delivered by the next lg_dispatch, in order; since they are already
 * read, the descriptor may not be readable: check lg_has_pending before polling, as above.
 *
 * Ownership: the json_object passed to a callback belongs to the library and is valid only during the call
 * (take json_object_get() to keep it). Strings returned by lg_last_error() stay valid until the next call on
 * the same client. Error strings returned through `char **error` are the caller's to free().
 */
#ifndef LIVEGATE_H
#define LIVEGATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version: livegate's (LiveGateVersion.current; scripts/check-install checks they agree). */
#define LIVEGATE_VERSION "0.1.0"

struct json_object;
typedef struct lg_client lg_client;

/* Values are exact (Protocol/ipc, "Values"). An integer beyond int64_t is a json_type_int read with
 * json_object_get_uint64 while it fits uint64_t; beyond both, a json_type_double that keeps its text:
 * json_object_get_string and json-c's writer give it exactly, json_object_get_double its nearest double. Floats keep
 * their text the same way. JSON text given to the library is sent with its numbers as written. */

/* Called with each object.changed of a token: `params` is the notification's params object
 * {"token", "snapshot" (object or null), "dataStatus", "loadingStatus", "error"?, "resync"?, "pendingWrites"?,
 * "unchanged"?}. After lg_reconnect the library observes each object again from the last version it delivered:
 * "unchanged": true (with a null snapshot) says that version is still current, so keep the snapshot you hold;
 * "resync": true says versions were skipped, and the next notification has the full state. */
typedef void (*lg_object_callback)(lg_client *client, int64_t token, struct json_object *params, void *userdata);

/* Called with each collection.changed of a token, after the library applied it to its copy of the token's
 * window: `params` is the notification's params object {"token", "changes", "items", "size", "count", "hasNext",
 * "hasPrevious", "dataStatus", "loadingStatus", "error"?, "resync"?, "reset"?}; `window` is the json array of
 * the window's snapshots after the change, in order. Both belong to the library: valid during the call, until
 * the callback invalidates the token (take json_object_get() to keep them). */
typedef void (*lg_collection_callback)(lg_client *client, int64_t token, struct json_object *params,
                                       struct json_object *window, void *userdata);

/* Called with each notification of a stream token: `method` is "stream.message", with `params`
 * {"token", "seq", "stream", "from", "to", "at", "message" (any JSON)}, or "stream.notice", with `params`
 * {"token", "resync"? (true: messages may have been lost), "error"? {"code", "message"}}. */
typedef void (*lg_stream_callback)(lg_client *client, int64_t token, const char *method, struct json_object *params,
                                   void *userdata);

/* Connects and says hello. Returns NULL on failure, with a message in *error (free it) when error is not NULL. */
lg_client *lg_connect(const char *socket_path, const char *client_name, char **error);

/* The descriptor to poll for input (POLLIN). */
int lg_fd(const lg_client *client);

/* Observes an object. Returns the token (> 0), or -1 with lg_last_error() set. `once`: fire exactly once. */
int64_t lg_observe_object(lg_client *client, const char *collection, const char *id, int once,
                          lg_object_callback callback, void *userdata);

/* Observes a query's result in pages of `page_size` (0: the default, 20). `query_json` is NULL or a JSON
 * object {"where": {field: value, ...}, "sort": {"field": name, "descending": bool}}. `anchor_last`: start from
 * the last page (and page backwards). Returns the token (> 0), or -1 with lg_last_error() set. */
int64_t lg_observe_collection(lg_client *client, const char *collection, const char *query_json, int page_size,
                              int anchor_last, int once, lg_collection_callback callback, void *userdata);

enum lg_page { LG_PAGE_NEXT, LG_PAGE_PREVIOUS, LG_PAGE_RESET };

/* Pages a collection token: one page more towards the end (NEXT) or the start (PREVIOUS, for anchor_last),
 * or back to one page (RESET). Returns 1 when the window changes (its items arrive through the callback),
 * 0 when there is no such page, -1 with lg_last_error() set. */
int lg_collection_page(lg_client *client, int64_t token, enum lg_page page);

/* The window of a collection token as the notifications delivered so far make it: its size, and the snapshot
 * at `index` (NULL when out of range or not a collection token; owned by the library, valid until the next
 * lg_dispatch or request). */
size_t lg_collection_size(const lg_client *client, int64_t token);
struct json_object *lg_collection_item(const lg_client *client, int64_t token, size_t index);

/* Reads `limit` (1-1000) snapshots from `offset` of the query's whole result, beyond the window, by index from
 * the daemon's cache (the daemon fetches it a page of 100 at a time as far as reads reach and does not hold it
 * in memory). Returns a new json-c array the caller owns (json_object_put it; empty past the end), and
 * stores the result's count in *count when count is not NULL; NULL with lg_last_error() set on failure. */
struct json_object *lg_collection_result(lg_client *client, int64_t token, size_t offset, int limit, int64_t *count);

/* Live Service streams, as the daemon's cloud user. Listens to the messages sent to that user (`follow_user`
 * NULL), or follows what `follow_user` posts. Returns the token (> 0; lg_invalidate stops listening or
 * unfollows), or -1 with lg_last_error() set (-32002: not among the user's subscribers; -32006: no stream). */
int64_t lg_stream_listen(lg_client *client, const char *stream, const char *follow_user, lg_stream_callback callback,
                         void *userdata);

/* Sends `message_json` (any JSON value, as text) to `to` on the stream, or posts it to the daemon user's
 * followers (`to` NULL). Returns the message's sequence number (> 0), or -1 with lg_last_error() set (-32002:
 * not among the recipient's publishers; -32003: over the cloud's size limit, not delivered). */
int64_t lg_stream_send(lg_client *client, const char *stream, const char *to, const char *message_json);

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

/* After lg_dispatch returned -1 (the daemon restarted, or closed the connection): connects again to the same
 * socket and observes every token again, under the same token numbers. An object token is re-observed from
 * the last version it delivered (nothing at or below it comes again; newer versions and deletions do); a
 * collection token's window is built again with as many pages as its moves gave it (its callback sees the
 * items arrive again, the current ones);
 * stream tokens listen again (messages sent while disconnected are not replayed to this client). One
 * attempt: returns 0, or -1 with lg_last_error() set (call it again later, e.g. with a backoff timer). The
 * descriptor changes: poll lg_fd() anew. */
int lg_reconnect(lg_client *client);

/* Closes the connection and frees the client. */
void lg_disconnect(lg_client *client);

#ifdef __cplusplus
}
#endif
#endif
