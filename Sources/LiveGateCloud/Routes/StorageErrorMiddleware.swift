// Licensed under the Apache License, Version 2.0.

import Hummingbird
import LiveCloudAPI
import Logging

/// Answers a request that failed on something other than its input — the database unreachable, a
/// connection lost mid-request, SQLite busy — with 503 `unavailable` (retry later) instead of a bare 500,
/// and logs what happened. Errors the routes throw on purpose (`HTTPResponseError`) pass unchanged.
struct StorageErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as any HTTPResponseError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            context.logger.error(
                "request failed in storage",
                metadata: ["method": "\(request.method)", "path": "\(request.uri.path)", "error": "\(error)"]
            )
            throw CloudHTTPError(.serviceUnavailable, .unavailable, "the server's storage is unavailable for now: retry the request")
        }
    }
}
