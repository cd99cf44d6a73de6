// Licensed under the Apache License, Version 2.0.

import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// Every path of `Protocol/cloud/openapi.json` answers its methods, and any other method with 405 and an `Allow`
/// header naming them; `OPTIONS` is 204 with `Allow`; `HEAD` is `GET` without the body; a path not in the
/// document is 404.
@Suite(.serialized) struct CloudMethodTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    func send(_ cluster: TestCluster, _ method: HTTPMethod, _ path: String) async throws -> (status: Int, allow: String?, body: String) {
        var request = HTTPClientRequest(url: cluster.cloudURL + path)
        request.method = method
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        return (Int(response.status.code), response.headers.first(name: "Allow"), String(buffer: try await response.body.collect(upTo: 1 << 20)))
    }

    @Test func eachPathAnswersItsMethodsAndTheOthersWith405AndAllow() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)  // with --fault-injection: /v1/admin/faults too
        defer { cluster.stop() }
        let data = try Data(contentsOf: URL(fileURLWithPath: Self.repository + "/Protocol/cloud/openapi.json"))
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        let methods = ["GET", "PUT", "POST", "PATCH", "DELETE"]
        for (template, operations) in paths.sorted(by: { $0.key < $1.key }) {
            let path = template.replacingOccurrences(of: #"\{([a-z]+)\}"#, with: "$11", options: .regularExpression)
            let listed = methods.filter { operations[$0.lowercased()] != nil }
            let allow = (listed + (listed.contains("GET") ? ["HEAD"] : []) + ["OPTIONS"]).joined(separator: ", ")
            for method in methods {
                let answer = try await send(cluster, HTTPMethod(rawValue: method), path)
                if listed.contains(method) {
                    #expect(answer.status != 405 && answer.status != 404 || answer.body.contains("not_found"), "\(method) \(path): \(answer)")
                } else {
                    #expect(answer.status == 405, "\(method) \(path): \(answer)")
                    #expect(answer.allow == allow, "\(method) \(path): \(answer)")
                    #expect(answer.body.contains(#""code":"method_not_allowed""#), "\(method) \(path): \(answer)")
                }
            }
            let options = try await send(cluster, .OPTIONS, path)
            #expect(options.status == 204 && options.allow == allow, "OPTIONS \(path): \(options)")
            let trace = try await send(cluster, .RAW(value: "TRACE"), path)
            #expect(trace.status == 405 && trace.allow == allow, "TRACE \(path): \(trace)")
        }
        let head = try await send(cluster, .HEAD, "/v1/stats")
        #expect(head.status == 200 && head.body.isEmpty, "\(head)")
        #expect(try await send(cluster, .GET, "/v1/nothing").status == 404)
        #expect(try await send(cluster, .DELETE, "/v1/collections/a/objects/b/c").status == 404)
    }
}
