#if canImport(Glibc)
import Glibc
#endif

/// The command line the client harness starts a client with (SPEC Appendix B.1): a
/// template split into words as a shell splits plain words, with 'single' and "double"
/// quotes and backslash escapes but no other shell syntax, in which `{name}` placeholders
/// are replaced inside each word. It is run with execve, never through a shell, so a
/// placeholder's value (a path with spaces) stays one argument.
public struct ClientCommandLine: Sendable, Equatable {
    public enum Problem: Error, Equatable, CustomStringConvertible {
        case empty
        case unclosedQuote
        case unknownPlaceholder(String)
        case executableNotFound(String)

        public var description: String {
            switch self {
            case .empty: "the client command is empty"
            case .unclosedQuote: "the client command has a quote that is not closed"
            case .unknownPlaceholder(let name):
                "the client command names {\(name)}, which is not a placeholder (they are \(ClientCommandLine.placeholderNames.map { "{\($0)}" }.joined(separator: ", ")))"
            case .executableNotFound(let name): "the client command's program \(name) is not found (not a path, and not on PATH)"
            }
        }
    }

    public static let placeholderNames = ["gateway", "store", "credential", "state", "device", "user", "provider-key"]

    /// The words of the template, placeholders not yet replaced.
    public let words: [String]

    public init(_ template: String) throws(Problem) {
        words = try ClientCommandLine.split(template)
        guard !words.isEmpty else { throw .empty }
        for word in words {
            for name in ClientCommandLine.placeholders(in: word) where !ClientCommandLine.placeholderNames.contains(name) {
                throw .unknownPlaceholder(name)
            }
        }
    }

    /// The placeholders the template uses.
    public var usedPlaceholders: Set<String> {
        Set(words.flatMap(ClientCommandLine.placeholders(in:)))
    }

    /// The arguments with every placeholder replaced; the first is the program, resolved
    /// against PATH when it has no slash.
    public func arguments(_ values: [String: String]) throws(Problem) -> [String] {
        var result = words.map { word in
            var replaced = word
            for (name, value) in values { replaced = replaced.replacing("{\(name)}", with: value) }
            return replaced
        }
        result[0] = try ClientCommandLine.resolve(result[0])
        return result
    }

    static func resolve(_ program: String) throws(Problem) -> String {
        if program.contains("/") { return program }
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":", omittingEmptySubsequences: true) {
            let candidate = "\(directory)/\(program)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        throw .executableNotFound(program)
    }

    static func placeholders(in word: String) -> [String] {
        var names: [String] = []
        var rest = Substring(word)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            names.append(String(rest[rest.index(after: open)..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return names
    }

    static func split(_ template: String) throws(Problem) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var quote: Character?
        var escaped = false
        for character in template {
            if escaped {
                current.append(character)
                escaped = false
                continue
            }
            switch (quote, character) {
            case (nil, "\\"), ("\"", "\\"):
                escaped = true
                inWord = true
            case (nil, "'"), (nil, "\""):
                quote = character
                inWord = true
            case (let open?, _) where character == open:
                quote = nil
            case (nil, _) where character.isWhitespace:
                if inWord { words.append(current) }
                current = ""
                inWord = false
            default:
                current.append(character)
                inWord = true
            }
        }
        guard quote == nil, !escaped else { throw .unclosedQuote }
        if inWord { words.append(current) }
        return words
    }
}
