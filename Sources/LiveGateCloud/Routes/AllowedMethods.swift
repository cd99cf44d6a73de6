// Licensed under the Apache License, Version 2.0.

import HTTPTypes
import Hummingbird
import LiveCloudAPI

/// The methods each path of the API answers: `Protocol/cloud/openapi.json`'s paths, which
/// CloudMethodTests checks this against. `:name` stands for one path segment.
enum AllowedMethods {
    static let api: [(path: String, methods: [HTTPRequest.Method])] = [
        ("/v1/auth/login", [.post]),
        ("/v1/auth/refresh", [.post]),
        ("/v1/auth/logout", [.post]),
        ("/v1/collections/:collection/objects", [.get]),
        ("/v1/collections/:collection/access", [.get]),
        ("/v1/collections/:collection/objects/:id", [.get, .put, .patch, .delete]),
        ("/v1/objects/read", [.post]),
        ("/v1/streams", [.get]),
        ("/v1/streams/:stream", [.put]),
        ("/v1/streams/:stream/users/:user/acl", [.get, .put]),
        ("/v1/streams/:stream/users/:user/messages", [.post]),
        ("/v1/stats", [.get]),
        ("/v1/realtime", [.get]),
    ]
    /// Only with `--fault-injection`.
    static let faults: [(path: String, methods: [HTTPRequest.Method])] = [("/v1/admin/faults", [.post, .delete])]

    /// The methods `path` (without its query) answers; nil when it is no path of the API.
    static func methods(of path: String, faultInjection: Bool) -> [HTTPRequest.Method]? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        for route in faultInjection ? api + faults : api {
            let pattern = route.path.split(separator: "/", omittingEmptySubsequences: false)
            guard pattern.count == segments.count else { continue }
            if zip(pattern, segments).allSatisfy({ $0.hasPrefix(":") ? !$1.isEmpty : $0 == $1 }) { return route.methods }
        }
        return nil
    }

    /// The `Allow` header of a path answering `methods`: HEAD wherever GET, and OPTIONS everywhere.
    static func allow(_ methods: [HTTPRequest.Method]) -> String {
        (methods + (methods.contains(.get) ? [.head] : []) + [.options]).map(\.rawValue).joined(separator: ", ")
    }
}

/// A method a known path does not answer is 405 with `Allow` (not the router's 404); `OPTIONS` is 204 with
/// `Allow`. (`HEAD` is `GET` without its body, by the router: RFC 9110, 9.3.2.) Only the router's own 404 (no
/// route for the path and method) is looked at, so a request the routes answer costs nothing here.
struct AllowedMethodsMiddleware<Context: RequestContext>: RouterMiddleware {
    let faultInjection: Bool

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            // The routes answer their 404s with a CloudHTTPError; this one is the router's.
            let path = request.uri.path
            guard let methods = AllowedMethods.methods(of: path, faultInjection: faultInjection) else { throw error }
            let allow = AllowedMethods.allow(methods)
            if request.method == .options { return Response(status: .noContent, headers: [.allow: allow]) }
            var refusal = CloudHTTPError(
                .methodNotAllowed,
                .methodNotAllowed,
                "\(request.method.rawValue) is not a method of \(path): it answers \(allow) (Protocol/cloud/openapi.json)"
            )
            refusal.headers[.allow] = allow
            throw refusal
        }
    }
}
