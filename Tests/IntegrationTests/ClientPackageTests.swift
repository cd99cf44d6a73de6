// Licensed under the Apache License, Version 2.0.

import Foundation
import Testing

/// An app that depends on this package for `LiveGateClient`, as README's "Using the Swift client in an app"
/// says (`traits: []`), resolves swift-nio and what it needs, nothing of the server, and builds README's
/// Swift example and its Observation model example against it.
@Suite(.serialized) struct ClientPackageTests {
    @Test func anAppDependingOnTheClientResolvesNothingOfTheServerAndBuildsTheReadmeExample() throws {
        var template = Array("/tmp/lgapp-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw ClusterError("mkdtemp failed") }
        let directory = String(cString: made)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let readme = try String(contentsOfFile: packageRoot + "/README.md", encoding: .utf8)
        // README's manifest as it is (this checkout is its "../livegate"), README's first Swift example as the program.
        let manifest = try #require(Self.block(after: "// swift-tools-version", in: readme), "README shows an app's manifest")
        let example = try #require(Self.block(after: "import LiveGateClient\n\nstruct Note", in: readme), "README's Swift example")
        let models = try #require(Self.block(after: "import LiveGateClient\nimport Observation", in: readme), "README's Observation example")
        #expect(manifest.contains(#"traits: []"#))
        let app = directory + "/MyApp"
        try FileManager.default.createDirectory(atPath: app + "/Sources/MyApp", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: directory + "/livegate", withDestinationPath: packageRoot)
        try manifest.write(toFile: app + "/Package.swift", atomically: true, encoding: .utf8)
        try example.write(toFile: app + "/Sources/MyApp/main.swift", atomically: true, encoding: .utf8)
        try models.write(toFile: app + "/Sources/MyApp/Models.swift", atomically: true, encoding: .utf8)

        let resolve = try runToCompletion("/usr/bin/env", ["swift", "package", "resolve", "--package-path", app])
        #expect(resolve.status == 0, "\(resolve.output)")
        let resolved = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: app + "/Package.resolved"))) as? [String: Any]
        let pins = (resolved?["pins"] as? [[String: Any]] ?? []).compactMap { $0["identity"] as? String }.sorted()
        print("an app of LiveGateClient resolves \(pins.count) packages: \(pins.joined(separator: ", "))")
        #expect(pins.count <= 6, "\(pins)")
        #expect(pins.contains("swift-nio"))
        for server in ["hummingbird", "grdb.swift", "postgres-nio", "async-http-client", "swift-nio-ssl", "swift-crypto"] {
            #expect(!pins.contains(server), "\(server) is the server's")
        }

        let started = ContinuousClock.now
        let build = try runToCompletion("/usr/bin/env", ["swift", "build", "--package-path", app])
        #expect(build.status == 0, "\(build.output.suffix(4000))")
        print("the app built cold in \(ContinuousClock.now - started)")
    }

    /// The fenced Swift block of `text` that starts with `start`.
    static func block(after start: String, in text: String) -> String? {
        guard let begin = text.range(of: "```swift\n" + start) else { return nil }
        let body = text[text.index(begin.lowerBound, offsetBy: "```swift\n".count)...]
        guard let end = body.range(of: "\n```") else { return nil }
        return String(body[..<end.lowerBound]) + "\n"
    }
}
