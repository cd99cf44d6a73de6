// Licensed under the Apache License, Version 2.0.

import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import LiveCloudAPI
import Logging

/// `POST|DELETE /v1/admin/faults`, and the middleware that applies REST faults.
struct FaultRoutes: Sendable {
    let faults: FaultInjector
    let hub: RealtimeHub
    let auth: AuthService

    func register(on router: Router<CloudRequestContext>) {
        router.post("/v1/admin/faults") { request, _ -> Response in
            let body = try await JSONResponse.decode(FaultRequest.self, from: request, limit: 1 << 16, shape: .faults)
            if let problem = body.problem { throw CloudHTTPError.badRequest(problem) }
            faults.apply(body)
            if body.dropConnections == true { hub.dropAll() }
            if body.expireTokens == true { try await auth.expireAll() }
            return Response(status: .noContent)
        }
        router.delete("/v1/admin/faults") { _, _ -> Response in
            faults.clear()
            return Response(status: .noContent)
        }
    }
}

/// Delays or fails REST calls as the fault injector says; admin, stats and the realtime upgrade pass.
struct FaultMiddleware<Context: RequestContext>: RouterMiddleware {
    let faults: FaultInjector

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        guard !path.hasPrefix("/v1/admin/"), path != CloudPath.stats, path != CloudPath.realtime else {
            return try await next(request, context)
        }
        let (delay, fail) = faults.nextRequest()
        if delay > .zero {
            context.logger.notice("a request is held by an injected delay", metadata: ["path": "\(path)", "delay": "\(delay)"])
        }
        guard await FaultInjector.wait(delay) else {
            throw CloudHTTPError(.serviceUnavailable, .unavailable, "the server is shutting down: retry on another, or later")
        }
        if fail {
            throw CloudHTTPError(.serviceUnavailable, .unavailable, "fault injection: this request fails on purpose")
        }
        let response = try await next(request, context)
        let writesAnObject = [.put, .patch, .delete].contains(request.method) && path.hasPrefix("/v1/collections/") && path.contains("/objects/")
        if writesAnObject, (200..<300).contains(response.status.code), faults.losesWriteAnswer() {
            throw CloudHTTPError(.serviceUnavailable, .unavailable, "fault injection: the write was applied, and this answer is lost on purpose")
        }
        return response
    }
}
