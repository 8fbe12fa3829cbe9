import PushTestSupport
import Testing

/// The options of a `--help` text, each with its whole (unwrapped) description.
private func optionParagraphs(_ help: String) -> [String: String] {
    var options: [String: String] = [:]
    var current: String?
    var inOptions = false
    for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
        if line == "OPTIONS:" { inOptions = true; continue }
        guard inOptions else { continue }
        if line.hasPrefix("  --") || line.hasPrefix("  -h") {
            let name = String(line.dropFirst(2).prefix { $0 != " " && $0 != "," })
            current = name
            options[name] = String(line.dropFirst(2 + name.count))
        } else if let current, line.hasPrefix("   ") {
            options[current, default: ""] += " " + line.trimmingCharacters(in: .whitespaces)
        }
    }
    return options.mapValues { $0.split(whereSeparator: \.isWhitespace).joined(separator: " ") }
}

@Suite("Service help texts", .ownThread)
struct ObserveHelpTextTests {
    @Test("store and gateway --help show a default for every setting and point at the config file", arguments: ["store", "gateway"])
    func defaultsShown(service: String) throws {
        let result = try SecurePushBinary.run([service, "--help"])
        #expect(result.status == 0)
        let help = result.stdout
        #expect(help.contains("DIR/securepush.conf") && help.contains("README.md"), "\(help)")
        let options = optionParagraphs(help)
        #expect(options.count > 15, "\(options.keys.sorted())")
        for (name, text) in options where !["--help", "--version", "--data-dir", "-h"].contains(name) {
            #expect(text.contains("(default: ") || text.contains("(default "), "\(service) \(name) shows no default: \(text)")
        }
        #expect(options["--metrics"]?.contains("/healthz") == true && options["--metrics"]?.contains("/readyz") == true)
        #expect(options["--metrics"]?.contains("\(service).metrics in the config file") == true)
        #expect(options["--log-format"]?.contains("(values: text, json)") == true)
        #expect(options["--log-format"]?.contains("(default: text, or \(service).log_format or log_format in the config file)") == true)
        #expect(options["--keepalive-ms"]?.contains("(default: 30000)") == true)
        #expect(options["--max-connections"]?.contains(service == "store" ? "(default: 10000)" : "(default: 20000)") == true)
        #expect(options["--listen"]?.contains("\(service).listen in the config file") == true)
    }
}
