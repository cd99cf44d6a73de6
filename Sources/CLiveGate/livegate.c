/* livegate.c — C client for livegated. Licensed under the Apache License, Version 2.0. */
#define _GNU_SOURCE
#include "livegate.h"

#include <json-c/json.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define LG_MAX_LINE (64u << 20)

struct lg_subscription {
    int64_t token;                              /* the application's: stable across lg_reconnect */
    int64_t wire;                               /* the daemon's token on the current connection */
    const char *method;                         /* how it was observed (for lg_reconnect) ... */
    json_object *params;                        /* ... and with what (owned) */
    int64_t last_version;                       /* object tokens: the last snapshot version delivered */
    int once;
    lg_object_callback callback;                /* object tokens */
    lg_collection_callback collection_callback; /* collection tokens */
    json_object *window;                        /* collection tokens: the window's snapshots (an array) */
    int extra_pages;                            /* collection tokens: pages added by moves (for lg_reconnect) */
    void *userdata;
    lg_stream_callback stream_callback; /* stream tokens */
};

struct lg_client {
    int fd;
    char *path, *name; /* for lg_reconnect */
    int64_t next_id;
    char *buf; /* bytes read, not yet split into lines */
    size_t len, cap;
    json_object **queued; /* notifications read while waiting for an answer */
    size_t nqueued, capqueued;
    struct lg_subscription *subs;
    size_t nsubs, capsubs;
    char error[512];
    int error_code;
    int closed;
};

static void set_error(lg_client *c, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->error, sizeof c->error, fmt, ap);
    va_end(ap);
    c->error_code = code;
}

static int grow(void **ptr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *p = realloc(*ptr, n * elem);
    if (!p) return -1;
    *ptr = p;
    *cap = n;
    return 0;
}

static int write_all(lg_client *c, const char *data, size_t len) {
    while (len > 0) {
        ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            set_error(c, 0, "writing to livegated failed: %s", strerror(errno));
            c->closed = 1;
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads once (blocking or not). Returns bytes read, 0 when nothing was available, -1 on close or error. */
static int read_some(lg_client *c, int blocking) {
    if (grow((void **)&c->buf, &c->cap, c->len + 65536, 1) < 0) {
        set_error(c, 0, "out of memory");
        return -1;
    }
    for (;;) {
        ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, blocking ? 0 : MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (n <= 0) {
            if (c->error[0] == '\0' || n < 0)
                set_error(c, 0, n == 0 ? "livegated closed the connection" : "reading from livegated failed: %s",
                          strerror(errno));
            c->closed = 1;
            return -1;
        }
        c->len += (size_t)n;
        return (int)n;
    }
}

/* Integers beyond int64_t and uint64_t, which json-c saturates (to INT64_MIN, INT64_MAX or UINT64_MAX), are kept
 * as their text: each becomes a json_type_double made with json_object_new_double_s, which json-c writes back as
 * that text and json_object_get_string gives as it is (json_object_get_double: its nearest double). Their texts
 * are found by a scan of the document, in the order json-c builds its integer values. A document with a member
 * name given twice (json-c keeps the last value, in the first one's place) is left as json-c parsed it. */
struct lg_int_token {
    const char *start;
    size_t length;
    int beyond; /* beyond int64_t and uint64_t */
};

static int integer_beyond(const char *digits, size_t length, int negative) {
    /* Canonical JSON integers have no leading zeros: more digits is a greater magnitude. */
    const char *limit = negative ? "9223372036854775808" : "18446744073709551615";
    size_t limit_length = strlen(limit);
    if (length != limit_length) return length > limit_length;
    return strncmp(digits, limit, length) > 0;
}

/* Scans the integer literals of `text` in document order; returns how many there are, and whether one is beyond
 * int64_t and uint64_t. Only when `tokens` is given does it record them (at most `capacity`): nearly every document
 * holds none beyond, and is scanned once with no allocation. */
static size_t scan_integers(const char *text, struct lg_int_token *tokens, size_t capacity, int *any_beyond) {
    size_t count = 0;
    *any_beyond = 0;
    for (const char *p = text; *p;) {
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1]) p++;
            if (*p) p++;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            const char *start = p;
            int negative = *p == '-';
            if (negative) p++;
            const char *digits = p;
            while (*p >= '0' && *p <= '9') p++;
            if (*p == '.' || *p == 'e' || *p == 'E') {
                while (*p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-' || (*p >= '0' && *p <= '9')) p++;
                continue;
            }
            int beyond = integer_beyond(digits, (size_t)(p - digits), negative);
            *any_beyond |= beyond;
            if (tokens && count < capacity) tokens[count] = (struct lg_int_token){start, (size_t)(p - start), beyond};
            count++;
        } else {
            p++;
        }
    }
    return count;
}

static size_t count_integers(json_object *value) {
    size_t n = 0;
    switch (json_object_get_type(value)) {
    case json_type_int: return 1;
    case json_type_array:
        for (size_t i = 0; i < json_object_array_length(value); i++) n += count_integers(json_object_array_get_idx(value, i));
        return n;
    case json_type_object: {
        json_object_object_foreach(value, key, member) {
            (void)key;
            n += count_integers(member);
        }
        return n;
    }
    default: return 0;
    }
}

/* Walks `value` in document order, taking the next token for each integer: returns what replaces `value` (an
 * integer beyond json-c's range, kept as its text), or NULL when it stays (its members replaced in place). */
static json_object *keep_integers(json_object *value, const struct lg_int_token *tokens, size_t *next) {
    switch (json_object_get_type(value)) {
    case json_type_int: {
        const struct lg_int_token *token = &tokens[(*next)++];
        if (!token->beyond) return NULL;
        char *text = strndup(token->start, token->length);
        if (!text) return NULL;
        json_object *kept = json_object_new_double_s(strtod(text, NULL), text);
        free(text);
        return kept;
    }
    case json_type_array:
        for (size_t i = 0; i < json_object_array_length(value); i++) {
            json_object *kept = keep_integers(json_object_array_get_idx(value, i), tokens, next);
            if (kept) json_object_array_put_idx(value, i, kept);
        }
        return NULL;
    case json_type_object: {
        json_object_object_foreach(value, key, member) {
            json_object *kept = keep_integers(member, tokens, next);
            /* Replaces the value in its entry: the iteration goes on. */
            if (kept) json_object_object_add(value, key, kept);
        }
        return NULL;
    }
    default: return NULL;
    }
}

/* `text` parsed by json-c, integers beyond its range kept as their text (see struct lg_int_token). */
static json_object *parse_exact(const char *text) {
    json_object *value = json_tokener_parse(text);
    if (!value) return NULL;
    int any_beyond;
    size_t count = scan_integers(text, NULL, 0, &any_beyond);
    if (!any_beyond || count_integers(value) != count) return value;
    struct lg_int_token *tokens = malloc(count * sizeof *tokens);
    if (!tokens) return value;
    scan_integers(text, tokens, count, &any_beyond);
    size_t next = 0;
    json_object *kept = keep_integers(value, tokens, &next);
    free(tokens);
    if (kept) {
        json_object_put(value);
        value = kept;
    }
    return value;
}

/* Takes the next complete line as parsed JSON, or NULL when none is complete (or it is not JSON). */
static json_object *next_message(lg_client *c, int *had_line) {
    *had_line = 0;
    char *nl = memchr(c->buf, '\n', c->len);
    if (!nl) {
        if (c->len > LG_MAX_LINE) {
            set_error(c, 0, "livegated sent a line over %u bytes", LG_MAX_LINE);
            c->closed = 1;
        }
        return NULL;
    }
    *had_line = 1;
    size_t n = (size_t)(nl - c->buf);
    *nl = '\0';
    json_object *msg = parse_exact(c->buf);
    memmove(c->buf, nl + 1, c->len - n - 1);
    c->len -= n + 1;
    return msg;
}

static int is_notification(json_object *msg) {
    return json_object_object_get_ex(msg, "method", NULL) && !json_object_object_get_ex(msg, "id", NULL);
}

static void handle_closing(lg_client *c, json_object *msg) {
    json_object *method, *params, *message;
    if (json_object_object_get_ex(msg, "method", &method) &&
        strcmp(json_object_get_string(method), "connection.closing") == 0 &&
        json_object_object_get_ex(msg, "params", &params) && json_object_object_get_ex(params, "message", &message)) {
        set_error(c, 0, "livegated closed the connection: %s", json_object_get_string(message));
    }
}

static struct lg_subscription *find(const lg_client *c, int64_t token) {
    for (size_t i = 0; i < c->nsubs; i++)
        if (c->subs[i].token == token) return &c->subs[i];
    return NULL;
}

static struct lg_subscription *find_wire(const lg_client *c, int64_t wire) {
    for (size_t i = 0; i < c->nsubs; i++)
        if (c->subs[i].wire == wire) return &c->subs[i];
    return NULL;
}

static void drop_subscription(lg_client *c, int64_t token) {
    for (size_t i = 0; i < c->nsubs; i++) {
        if (c->subs[i].token == token) {
            json_object_put(c->subs[i].window);
            json_object_put(c->subs[i].params);
            c->subs[i] = c->subs[--c->nsubs];
            return;
        }
    }
}

static int64_t pair_at(json_object *pairs, size_t i, size_t which) {
    return json_object_get_int64(json_object_array_get_idx(json_object_array_get_idx(pairs, i), which));
}

static json_object *item_at(json_object *items, int64_t index) {
    char key[24];
    snprintf(key, sizeof key, "%lld", (long long)index);
    json_object *item = NULL;
    return json_object_object_get_ex(items, key, &item) ? item : NULL;
}

/* Applies a collection.changed to `old` (an array), as Protocol/ipc/README.md specifies. Returns the new window
 * (a new array), or NULL when the notification does not fit `old`. */
static json_object *apply_changes(json_object *old, json_object *params) {
    json_object *changes, *items, *size_obj, *reset, *deletions, *insertions, *modifications, *moves;
    if (!json_object_object_get_ex(params, "changes", &changes) || !json_object_object_get_ex(params, "items", &items) ||
        !json_object_object_get_ex(params, "size", &size_obj) ||
        !json_object_object_get_ex(changes, "deletions", &deletions) ||
        !json_object_object_get_ex(changes, "insertions", &insertions) ||
        !json_object_object_get_ex(changes, "modifications", &modifications) ||
        !json_object_object_get_ex(changes, "moves", &moves))
        return NULL;
    int is_reset = json_object_object_get_ex(params, "reset", &reset) && json_object_get_boolean(reset);
    size_t old_count = is_reset ? 0 : json_object_array_length(old);
    int64_t size = json_object_get_int64(size_obj);
    size_t ndel = json_object_array_length(deletions), nins = json_object_array_length(insertions);
    size_t nmod = json_object_array_length(modifications), nmov = json_object_array_length(moves);
    if (size < 0 || (int64_t)old_count - (int64_t)ndel + (int64_t)nins != size) return NULL;
    json_object **slots = calloc((size_t)size + 1, sizeof *slots);
    char *leaving = calloc(old_count + 1, 1);
    json_object *result = NULL;
    if (!slots || !leaving) goto done;
    for (size_t i = 0; i < ndel; i++) {
        int64_t d = json_object_get_int64(json_object_array_get_idx(deletions, i));
        if (d < 0 || (size_t)d >= old_count) goto done;
        leaving[d] = 1;
    }
    for (size_t i = 0; i < nins; i++) {
        int64_t at = json_object_get_int64(json_object_array_get_idx(insertions, i));
        json_object *item = item_at(items, at);
        if (at < 0 || at >= size || slots[at] || !item) goto done;
        slots[at] = json_object_get(item);
    }
    for (size_t i = 0; i < nmov; i++) {
        int64_t from = pair_at(moves, i, 0), to = pair_at(moves, i, 1);
        if (from < 0 || (size_t)from >= old_count || to < 0 || to >= size || slots[to]) goto done;
        slots[to] = json_object_get(json_object_array_get_idx(old, (size_t)from));
        leaving[from] = 1;
    }
    int64_t free_slot = 0;
    for (size_t i = 0; i < old_count; i++) {
        if (leaving[i]) continue;
        while (free_slot < size && slots[free_slot]) free_slot++;
        if (free_slot >= size) goto done;
        slots[free_slot] = json_object_get(json_object_array_get_idx(old, i));
    }
    for (size_t i = 0; i < nmod; i++) {
        int64_t to = pair_at(modifications, i, 1);
        json_object *item = item_at(items, to);
        if (to < 0 || to >= size || !item) goto done;
        json_object_put(slots[to]);
        slots[to] = json_object_get(item);
    }
    result = json_object_new_array_ext((int)size);
    for (int64_t i = 0; i < size; i++) {
        if (!slots[i]) {
            json_object_put(result);
            result = NULL;
            goto done;
        }
        json_object_array_add(result, slots[i]);
        slots[i] = NULL;
    }
done:
    if (slots)
        for (int64_t i = 0; i < size; i++) json_object_put(slots[i]);
    free(slots);
    free(leaving);
    return result;
}

static json_object *call(lg_client *c, const char *method, json_object *params);

static int deliver(lg_client *c, json_object *msg) {
    json_object *method, *params, *token;
    handle_closing(c, msg);
    if (!json_object_object_get_ex(msg, "method", &method) || !json_object_object_get_ex(msg, "params", &params) ||
        !json_object_object_get_ex(params, "token", &token))
        return 0;
    struct lg_subscription *s = find_wire(c, json_object_get_int64(token));
    if (!s) return 0;
    int64_t t = s->token;
    /* The application sees its own token, whatever the daemon's is on this connection. */
    if (s->wire != t) json_object_object_add(params, "token", json_object_new_int64(t));
    const char *name = json_object_get_string(method);
    if (strcmp(name, "object.changed") == 0 && s->callback) {
        json_object *snapshot, *version;
        if (json_object_object_get_ex(params, "snapshot", &snapshot) && json_object_object_get_ex(snapshot, "version", &version))
            s->last_version = json_object_get_int64(version);
        struct lg_subscription copy = *s; /* the callback may invalidate the token */
        if (copy.once) drop_subscription(c, t); /* the daemon ended it */
        copy.callback(c, t, params, copy.userdata);
        return 1;
    }
    if ((strcmp(name, "stream.message") == 0 || strcmp(name, "stream.notice") == 0) && s->stream_callback) {
        s->stream_callback(c, t, name, params, s->userdata);
        return 1;
    }
    if (strcmp(name, "collection.changed") == 0 && s->collection_callback) {
        json_object *window = apply_changes(s->window, params);
        if (!window) {
            set_error(c, 0, "a collection.changed notification for token %lld did not fit its window", (long long)t);
            return 0;
        }
        json_object_put(s->window);
        s->window = window;
        struct lg_subscription copy = *s;
        json_object_get(window); /* kept for the call even if the token ends */
        if (copy.once) drop_subscription(c, t);
        copy.collection_callback(c, t, params, window, copy.userdata);
        json_object_put(window);
        return 1;
    }
    return 0;
}

/* Observes with `params` (owned: kept for lg_reconnect) and records the subscription. Returns its token. */
static int64_t subscribe(lg_client *c, const char *method, json_object *params, struct lg_subscription sub) {
    if (grow((void **)&c->subs, &c->capsubs, c->nsubs + 1, sizeof *c->subs) < 0) {
        json_object_put(params);
        json_object_put(sub.window);
        set_error(c, 0, "out of memory");
        return -1;
    }
    json_object *result = call(c, method, json_object_get(params));
    json_object *token;
    int64_t t = result && json_object_object_get_ex(result, "token", &token) ? json_object_get_int64(token) : -1;
    json_object_put(result);
    if (t <= 0) {
        json_object_put(params);
        json_object_put(sub.window);
        return -1;
    }
    sub.token = sub.wire = t;
    sub.method = method;
    sub.params = params;
    c->subs[c->nsubs++] = sub;
    return t;
}

/* Sends a request and waits for its answer; returns the result (caller puts it), or NULL with the error set. */
static json_object *call(lg_client *c, const char *method, json_object *params) {
    if (c->closed) {
        json_object_put(params);
        return NULL;
    }
    int64_t id = ++c->next_id;
    json_object *req = json_object_new_object();
    json_object_object_add(req, "jsonrpc", json_object_new_string("2.0"));
    json_object_object_add(req, "id", json_object_new_int64(id));
    json_object_object_add(req, "method", json_object_new_string(method));
    json_object_object_add(req, "params", params);
    const char *text = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
    int rc = write_all(c, text, strlen(text));
    if (rc == 0) rc = write_all(c, "\n", 1);
    json_object_put(req);
    if (rc < 0) return NULL;
    for (;;) {
        int had_line;
        json_object *msg = next_message(c, &had_line);
        if (!had_line) {
            if (c->closed || read_some(c, 1) < 0) return NULL;
            continue;
        }
        if (!msg) continue;
        if (is_notification(msg)) {
            handle_closing(c, msg);
            if (grow((void **)&c->queued, &c->capqueued, c->nqueued + 1, sizeof *c->queued) < 0) {
                json_object_put(msg);
                set_error(c, 0, "out of memory");
                return NULL;
            }
            c->queued[c->nqueued++] = msg;
            continue;
        }
        json_object *jid, *result, *error;
        if (!json_object_object_get_ex(msg, "id", &jid) || json_object_get_int64(jid) != id) {
            json_object_put(msg);
            continue;
        }
        if (json_object_object_get_ex(msg, "error", &error)) {
            json_object *code, *message;
            json_object_object_get_ex(error, "code", &code);
            json_object_object_get_ex(error, "message", &message);
            set_error(c, json_object_get_int(code), "%s", message ? json_object_get_string(message) : "error");
            json_object_put(msg);
            return NULL;
        }
        if (!json_object_object_get_ex(msg, "result", &result)) {
            set_error(c, 0, "livegated answered without a result");
            json_object_put(msg);
            return NULL;
        }
        json_object_get(result);
        json_object_put(msg);
        c->error[0] = '\0';
        c->error_code = 0;
        return result;
    }
}

/* Connects to c->path and says hello as c->name. Returns 0, or -1 with the error set. */
static int open_connection(lg_client *c) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(c->path) >= sizeof addr.sun_path) {
        set_error(c, 0, "the socket path is too long");
        return -1;
    }
    strcpy(addr.sun_path, c->path);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        set_error(c, 0, "cannot connect to livegated at %s: %s", c->path, strerror(errno));
        if (c->fd >= 0) close(c->fd);
        c->fd = -1;
        return -1;
    }
    c->closed = 0;
    json_object *params = json_object_new_object();
    json_object_object_add(params, "client", json_object_new_string(c->name));
    json_object_object_add(params, "protocol", json_object_new_int(1));
    json_object *result = call(c, "hello", params);
    if (!result) return -1;
    json_object_put(result);
    return 0;
}

lg_client *lg_connect(const char *socket_path, const char *client_name, char **error) {
    const char *path = socket_path ? socket_path : getenv("LIVEGATE_SOCKET");
    if (!path || !*path) path = "/run/livegate/livegate.sock"; /* the rule of DaemonSocket.defaultPath */
    lg_client *c = calloc(1, sizeof *c);
    if (c) {
        c->fd = -1;
        c->path = strdup(path);
        c->name = strdup(client_name ? client_name : "liblivegate");
    }
    if (!c || !c->path || !c->name) {
        if (error) *error = strdup("out of memory");
        lg_disconnect(c);
        return NULL;
    }
    if (open_connection(c) < 0) {
        if (error) *error = strdup(c->error);
        lg_disconnect(c);
        return NULL;
    }
    return c;
}

int lg_reconnect(lg_client *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->len = 0;
    for (size_t i = 0; i < c->nqueued; i++) json_object_put(c->queued[i]);
    c->nqueued = 0;
    c->error[0] = '\0';
    c->error_code = 0;
    if (open_connection(c) < 0) {
        c->closed = 1;
        return -1;
    }
    for (size_t i = 0; i < c->nsubs; i++) {
        struct lg_subscription *s = &c->subs[i];
        if (s->callback && s->last_version > 0) /* nothing at or below what was delivered comes again */
            json_object_object_add(s->params, "sinceVersion", json_object_new_int64(s->last_version));
        if (s->collection_callback) { /* the window is built again, whole: all the pages it had, at once */
            json_object_put(s->window);
            s->window = json_object_new_array();
            if (s->extra_pages > 0)
                json_object_object_add(s->params, "pages", json_object_new_int(1 + s->extra_pages));
            else
                json_object_object_del(s->params, "pages");
        }
        json_object *result = call(c, s->method, json_object_get(s->params));
        json_object *token;
        int64_t t = result && json_object_object_get_ex(result, "token", &token) ? json_object_get_int64(token) : -1;
        json_object_put(result);
        if (t <= 0) return -1;
        s->wire = t;
    }
    return 0;
}

int lg_fd(const lg_client *c) { return c->fd; }

int64_t lg_observe_object(lg_client *c, const char *collection, const char *id, int once,
                          lg_object_callback callback, void *userdata) {
    if (!callback) {
        set_error(c, 0, "a callback is required");
        return -1;
    }
    json_object *params = json_object_new_object();
    json_object_object_add(params, "collection", json_object_new_string(collection));
    json_object_object_add(params, "id", json_object_new_string(id));
    if (once) json_object_object_add(params, "once", json_object_new_boolean(1));
    return subscribe(c, "object.observe", params,
                     (struct lg_subscription){.callback = callback, .userdata = userdata, .once = once});
}

int64_t lg_observe_collection(lg_client *c, const char *collection, const char *query_json, int page_size,
                              int anchor_last, int once, lg_collection_callback callback, void *userdata) {
    if (!callback) {
        set_error(c, 0, "a callback is required");
        return -1;
    }
    json_object *query = NULL;
    if (query_json) {
        query = parse_exact(query_json);
        if (!query || !json_object_is_type(query, json_type_object)) {
            json_object_put(query);
            set_error(c, -32602, "the query must be a JSON object like {\"where\":{...},\"sort\":{\"field\":...}}");
            return -1;
        }
    }
    json_object *params = json_object_new_object();
    json_object_object_add(params, "collection", json_object_new_string(collection));
    if (query) json_object_object_add(params, "query", query);
    if (page_size > 0) json_object_object_add(params, "pageSize", json_object_new_int(page_size));
    if (anchor_last) json_object_object_add(params, "anchor", json_object_new_string("last"));
    if (once) json_object_object_add(params, "once", json_object_new_boolean(1));
    return subscribe(c, "collection.observe", params,
                     (struct lg_subscription){.collection_callback = callback,
                                              .window = json_object_new_array(),
                                              .userdata = userdata,
                                              .once = once});
}

int lg_collection_page(lg_client *c, int64_t token, enum lg_page page) {
    struct lg_subscription *s = find(c, token);
    const char *method = page == LG_PAGE_NEXT       ? "collection.nextPage"
                         : page == LG_PAGE_PREVIOUS ? "collection.previousPage"
                                                    : "collection.resetPage";
    json_object *params = json_object_new_object();
    json_object_object_add(params, "token", json_object_new_int64(s ? s->wire : token));
    json_object *result = call(c, method, params);
    if (!result) return -1;
    json_object *moved;
    int r = json_object_object_get_ex(result, "moved", &moved) && json_object_get_boolean(moved) ? 1 : 0;
    json_object_put(result);
    if (r && s) /* remembered, so that lg_reconnect observes the window with its pages again */
        s->extra_pages = page == LG_PAGE_RESET ? 0 : s->extra_pages + 1;
    return r;
}

size_t lg_collection_size(const lg_client *c, int64_t token) {
    struct lg_subscription *s = find(c, token);
    return s && s->window ? json_object_array_length(s->window) : 0;
}

struct json_object *lg_collection_item(const lg_client *c, int64_t token, size_t index) {
    struct lg_subscription *s = find(c, token);
    if (!s || !s->window || index >= json_object_array_length(s->window)) return NULL;
    return json_object_array_get_idx(s->window, index);
}

json_object *lg_collection_result(lg_client *c, int64_t token, size_t offset, int limit, int64_t *count) {
    struct lg_subscription *s = find(c, token);
    json_object *params = json_object_new_object();
    json_object_object_add(params, "token", json_object_new_int64(s ? s->wire : token));
    json_object_object_add(params, "offset", json_object_new_int64((int64_t)offset));
    json_object_object_add(params, "limit", json_object_new_int(limit));
    json_object_object_add(params, "from", json_object_new_string("result"));
    json_object *result = call(c, "collection.items", params);
    if (!result) return NULL;
    json_object *items = NULL, *total;
    if (count && json_object_object_get_ex(result, "count", &total)) *count = json_object_get_int64(total);
    if (!json_object_object_get_ex(result, "items", &items) || !json_object_is_type(items, json_type_array)) {
        json_object_put(result);
        set_error(c, 0, "livegated answered collection.items without items");
        return NULL;
    }
    json_object_get(items); /* kept beyond the answer it came in */
    json_object_put(result);
    return items;
}

int64_t lg_stream_listen(lg_client *c, const char *stream, const char *follow_user, lg_stream_callback callback,
                         void *userdata) {
    if (!callback || !stream) {
        set_error(c, -32602, "a stream and a callback are required");
        return -1;
    }
    json_object *params = json_object_new_object();
    json_object_object_add(params, "stream", json_object_new_string(stream));
    if (follow_user) json_object_object_add(params, "user", json_object_new_string(follow_user));
    return subscribe(c, follow_user ? "stream.follow" : "stream.listen", params,
                     (struct lg_subscription){.userdata = userdata, .stream_callback = callback});
}

int64_t lg_stream_send(lg_client *c, const char *stream, const char *to, const char *message_json) {
    json_object *message = message_json ? parse_exact(message_json) : NULL;
    if (!stream || !message_json || (!message && strcmp(message_json, "null") != 0)) {
        json_object_put(message);
        set_error(c, -32602, "the message must be JSON text");
        return -1;
    }
    json_object *params = json_object_new_object();
    json_object_object_add(params, "stream", json_object_new_string(stream));
    if (to) json_object_object_add(params, "to", json_object_new_string(to));
    json_object_object_add(params, "message", message);
    json_object *result = call(c, to ? "stream.send" : "stream.post", params);
    if (!result) return -1;
    json_object *seq;
    int64_t n = json_object_object_get_ex(result, "seq", &seq) ? json_object_get_int64(seq) : -1;
    json_object_put(result);
    return n;
}

int lg_invalidate(lg_client *c, int64_t token) {
    struct lg_subscription *s = find(c, token);
    json_object *params = json_object_new_object();
    json_object_object_add(params, "token", json_object_new_int64(s ? s->wire : token));
    json_object *result = call(c, "token.invalidate", params);
    drop_subscription(c, token);
    if (!result) return -1;
    json_object_put(result);
    return 0;
}

int64_t lg_update_object(lg_client *c, const char *collection, const char *id, const char *data_json) {
    json_object *data = parse_exact(data_json);
    if (!data || !json_object_is_type(data, json_type_object)) {
        json_object_put(data);
        set_error(c, -32602, "the data must be a JSON object");
        return -1;
    }
    json_object *params = json_object_new_object();
    json_object_object_add(params, "collection", json_object_new_string(collection));
    json_object_object_add(params, "id", json_object_new_string(id));
    json_object_object_add(params, "data", data);
    json_object *result = call(c, "object.update", params);
    if (!result) return -1;
    json_object *snapshot, *version;
    int64_t v = -1;
    if (json_object_object_get_ex(result, "snapshot", &snapshot) &&
        json_object_object_get_ex(snapshot, "version", &version))
        v = json_object_get_int64(version);
    json_object_put(result);
    return v;
}

int lg_dispatch(lg_client *c) {
    int delivered = 0;
    /* First what arrived while a request waited, in order. */
    for (size_t i = 0; i < c->nqueued; i++) {
        delivered += deliver(c, c->queued[i]);
        json_object_put(c->queued[i]);
    }
    c->nqueued = 0;
    for (;;) {
        int had_line;
        json_object *msg = next_message(c, &had_line);
        if (had_line) {
            if (msg) {
                delivered += deliver(c, msg);
                json_object_put(msg);
            }
            continue;
        }
        if (c->closed) return -1;
        int n = read_some(c, 0);
        if (n < 0) return delivered > 0 ? delivered : -1;
        if (n == 0) return delivered;
    }
}

int lg_has_pending(const lg_client *c) { return c->nqueued > 0 || (c->len > 0 && memchr(c->buf, '\n', c->len) != NULL); }

const char *lg_last_error(const lg_client *c) { return c->error; }

int lg_last_error_code(const lg_client *c) { return c->error_code; }

void lg_disconnect(lg_client *c) {
    if (!c) return;
    if (c->fd >= 0) close(c->fd);
    for (size_t i = 0; i < c->nqueued; i++) json_object_put(c->queued[i]);
    free(c->queued);
    for (size_t i = 0; i < c->nsubs; i++) {
        json_object_put(c->subs[i].window);
        json_object_put(c->subs[i].params);
    }
    free(c->subs);
    free(c->buf);
    free(c->path);
    free(c->name);
    free(c);
}
