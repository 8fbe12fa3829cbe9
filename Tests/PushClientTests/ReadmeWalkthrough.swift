import Foundation
import PushTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// README.md, read from the source tree, and the pieces of it the README tests run or check.
enum Readme {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    static func text() throws -> String {
        try String(contentsOfFile: repositoryRoot + "/README.md", encoding: .utf8)
    }

    /// The ```sh blocks (or those of `language`) after the line `heading` and before the
    /// next heading of any level (a `#` line inside a code block is not a heading).
    static func shellBlocks(in markdown: String, heading: String, language: String = "sh") -> [String] {
        var blocks: [String] = []
        var inSection = false
        var block: [Substring]?
        var fenced = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                if fenced {
                    if let lines = block { blocks.append(lines.joined(separator: "\n")) }
                    block = nil
                } else if inSection, line.dropFirst(3).split(separator: " ").first.map(String.init) == language {
                    block = []
                }
                fenced.toggle()
                continue
            }
            if fenced {
                block?.append(line)
                continue
            }
            if line == heading {
                inSection = true
            } else if inSection, line.hasPrefix("#") {
                break
            }
        }
        return blocks
    }

    /// The commands of shell blocks: backslash-continued lines joined, blank lines dropped.
    static func commands(_ blocks: [String]) -> [String] {
        var commands: [String] = []
        for block in blocks {
            var pending = ""
            for line in block.split(separator: "\n") {
                if line.hasSuffix("\\") {
                    pending += line.dropLast() + " "
                    continue
                }
                let command = pending + line
                pending = ""
                if command.contains(where: { !$0.isWhitespace }) { commands.append(command) }
            }
            if !pending.isEmpty { commands.append(pending) }
        }
        return commands
    }

    /// The command without a trailing `# comment` (a `#` outside quotes, after a space).
    static func withoutComment(_ command: String) -> String {
        var quote: Character?
        var previous: Character = " "
        for index in command.indices {
            let character = command[index]
            if let open = quote {
                if character == open { quote = nil }
            } else if character == "'" || character == "\"" {
                quote = character
            } else if character == "#", previous.isWhitespace {
                return String(command[..<index]).trimmingCharacters(in: .whitespaces)
            }
            previous = character
        }
        return command.trimmingCharacters(in: .whitespaces)
    }
}

/// A free TCP port on 127.0.0.1 (bound once, then released for the command to take).
func readmeFreePort() throws -> Int { try freeLoopbackPort() }

struct ReadmeFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
