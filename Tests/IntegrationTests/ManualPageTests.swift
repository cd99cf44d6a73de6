// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveJSON
import Testing

/// The programs' manual pages (man/, made by `scripts/generate-man` from their --help) name every option
/// the programs take: a page that fell behind its program fails here until it is generated again.
@Suite struct ManualPageTests {
    static func array(_ value: JSONValue?) -> [JSONValue] {
        if case .array(let items)? = value { return items }
        return []
    }

    @Test(arguments: [("livegated", "8"), ("livegatectl", "1"), ("livegate-cloud", "8")])
    func thePageNamesEveryOptionOfItsProgram(program: String, section: String) throws {
        let page = try String(contentsOfFile: SystemdSandbox.repository + "/man/\(program).\(section)", encoding: .utf8)
        #expect(page.contains(".Dt \(program.uppercased()) \(section)"), "section \(section)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestCluster.binDirectory + "/" + program)
        process.arguments = ["--experimental-dump-help"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let help = try JSONValue(parsing: data)
        var missing: [String] = []
        func visit(_ command: JSONValue, path: String) {
            for argument in Self.array(command["arguments"]) where argument["shouldDisplay"] != .bool(false) {
                for name in Self.array(argument["names"]) where name["kind"]?.stringValue == "long" {
                    guard let long = name["name"]?.stringValue, long != "help", long != "version" else { continue }
                    if !page.contains("Fl -\(long)") { missing.append("\(path) --\(long)") }
                }
            }
            for subcommand in Self.array(command["subcommands"]) {
                guard let name = subcommand["commandName"]?.stringValue, name != "help" else { continue }
                if !page.contains(name) { missing.append("\(path) \(name)") }
                visit(subcommand, path: "\(path) \(name)")
            }
        }
        visit(try #require(help["command"]), path: program)
        #expect(missing.isEmpty, "not in man/\(program).\(section) (run scripts/generate-man): \(missing)")
    }
}
