import Foundation
import Testing
import PushSecurity

@Suite("README: the config file section matches the schema")
struct ReadmeConfigTests {
    static let begin = "<!-- config keys: generated from ConfigSchema (Sources/PushSecurity/ConfigSchema.swift); ReadmeConfigTests checks it -->"
    static let end = "<!-- end of config keys -->"

    @Test("the table of keys between the markers is ConfigSchema.markdownTable")
    func table() throws {
        let readme = try Readme.text()
        guard let start = readme.range(of: Self.begin + "\n"), let stop = readme.range(of: Self.end, range: start.upperBound..<readme.endIndex) else {
            Issue.record("README.md lacks the config key markers")
            return
        }
        let table = String(readme[start.upperBound..<stop.lowerBound])
        // SECUREPUSH_WRITE_README_TABLE=1 swift test --filter ReadmeConfigTests writes it in.
        if ProcessInfo.processInfo.environment["SECUREPUSH_WRITE_README_TABLE"] == "1", table != ConfigSchema.markdownTable {
            let updated = String(readme[..<start.upperBound]) + ConfigSchema.markdownTable + String(readme[stop.lowerBound...])
            try updated.write(toFile: Readme.repositoryRoot + "/README.md", atomically: true, encoding: .utf8)
            return
        }
        #expect(table == ConfigSchema.markdownTable, "README.md's table is out of date; paste this between the markers:\n\(ConfigSchema.markdownTable)")
    }

    @Test("the example errors in the README are the ones the code writes")
    func exampleErrors() throws {
        let readme = try Readme.text()
        let path = "/srv/push/securepush.conf"
        let examples: [(line: Int, key: String, value: String)] = [(12, "store.max_payload", "1"), (3, "gateway.listen", "::1:7071")]
        for example in examples {
            let failure: Deployment.Failure
            switch ConfigSchema.problem(name: example.key, value: example.value) {
            case .unknownKey(let suggestion)?:
                failure = .unknownKey(path, line: example.line, key: example.key, suggestion: suggestion)
            case .invalidValue(let expected)?:
                failure = .invalidValue(path, line: example.line, key: example.key, value: example.value, expected: expected)
            case nil:
                Issue.record("\(example.key) = \(example.value) is accepted")
                continue
            }
            #expect(readme.contains("\n" + failure.description + "\n"), "README.md lacks the line: \(failure.description)")
        }
    }
}
