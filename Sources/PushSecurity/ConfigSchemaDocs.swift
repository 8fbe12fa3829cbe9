/// The schema in words: the default config `securepush init` writes, the lines `--help`
/// shows, and the README's table, all made from `ConfigSchema.keys` so none can drift.
extension ConfigSchema {
    /// The config file `securepush init` writes: the common keys as active lines, every
    /// other key as a comment showing its default (or an example when it has none).
    public static var defaultConfigText: String {
        var lines = [
            "# securepush deployment configuration: one `key = value` a line; `#` starts a comment.",
            "# A command-line flag wins over its key.",
            "# Unknown keys and bad values stop a service at start, naming the line.",
            "# Every key: `securepush store --help`, `securepush gateway --help`, README.md.",
        ]
        for key in keys {
            lines.append("")
            var note = key.valueText
            if let defaultValue = key.defaultValue, !key.inTemplate { note += "; default \(defaultValue)" }
            if key.defaultValue == nil { note += "; off when unset" }
            if let flag = key.flag { note += "; flag \(flag)" }
            if key.shared {
                note += "; for both services, or for one as "
                    + list(key.services.map { "\($0.rawValue).\(key.name)" }, conjunction: "or") + " (which wins)"
            }
            lines += wrap(key.summary + " Values: " + note + ".", width: 88, prefix: "# ")
            let value = key.defaultValue ?? key.example ?? ""
            lines.append((key.inTemplate ? "" : "# ") + "\(key.name) = \(value)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The config keys `service` reads, for its `--help`: a heading, then per key a line
    /// `NAME = VALUES` and below it the summary, default and flag, each line at most
    /// `width` columns so a help formatter does not wrap them again.
    public static func helpText(for service: ConfigService, width: Int = 78) -> [String] {
        var lines = wrap("Config file keys (DIR/securepush.conf, one `key = value` a line; a flag wins over its key; "
                         + "a [\(service.rawValue).]KEY may also be written bare, to set it for both services):",
                         width: width, prefix: "")
        for key in keys(for: service) {
            var details = key.defaultValue.map { "Default \($0)" } ?? "Off when unset"
            if let flag = key.flag { details += "; flag \(flag)" }
            lines += wrap("\(key.displayName(for: service)) = \(key.valueText)", width: width, prefix: "  ", continuation: "      ")
            lines += wrap(key.summary + " " + details + ".", width: width, prefix: "      ")
        }
        return lines
    }

    /// The README's table of every key, in Markdown.
    public static var markdownTable: String {
        var lines = ["| key | value | default | flag | what it sets |", "|---|---|---|---|---|"]
        for key in keys {
            let name = key.shared ? "`\(key.name)`, `store.\(key.name)`, `gateway.\(key.name)`" : "`\(key.name)`"
            let values: String
            switch key.kind {
            case .choice(let choices): values = list(choices.map { "`\($0)`" }, conjunction: "or")
            default: values = key.valueText
            }
            let cells = [name, values, key.defaultValue.map { "`\($0)`" } ?? "off", key.flag.map { "`\($0)`" } ?? "",
                         key.summary.replacingPipes]
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Words of `text` in lines of at most `width` columns (a longer word gets a line of
    /// its own), the first starting with `prefix` and the others with `continuation`.
    static func wrap(_ text: String, width: Int, prefix: String, continuation: String? = nil) -> [String] {
        var lines: [String] = []
        var line = prefix
        var lineHasWord = false
        for word in text.split(separator: " ") {
            if lineHasWord, line.count + 1 + word.count > width {
                lines.append(line)
                line = continuation ?? prefix
                lineHasWord = false
            }
            line += (lineHasWord ? " " : "") + word
            lineHasWord = true
        }
        if lineHasWord { lines.append(line) }
        return lines
    }
}

extension String {
    var replacingPipes: String { split(separator: "|", omittingEmptySubsequences: false).joined(separator: "\\|") }
}
