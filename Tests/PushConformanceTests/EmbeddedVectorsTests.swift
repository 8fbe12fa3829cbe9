import Foundation
import PushConformance
import PushTestSupport
import Testing

/// The vectors built into the binary are protocol/vectors, byte for byte, and the
/// generated source is what the generator below writes: they cannot drift apart.
///
/// After changing protocol/vectors, regenerate Sources/PushConformance/EmbeddedVectors.swift:
///
///     SECUREPUSH_WRITE_EMBEDDED_VECTORS=1 swift test --filter EmbeddedVectorsTests
@Suite("The golden vectors built into the binary", .ownThread)
struct EmbeddedVectorsTests {
    static let vectorsDirectory = VectorFiles.protocolDirectory.appendingPathComponent("vectors")
    static let sourceFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/PushConformance/EmbeddedVectors.swift")

    static func vectorFilesOnDisk() throws -> [(name: String, text: String)] {
        let names = try FileManager.default.contentsOfDirectory(atPath: vectorsDirectory.path).filter { $0.hasSuffix(".vec") }.sorted()
        return try names.map { ($0, try String(contentsOf: vectorsDirectory.appendingPathComponent($0), encoding: .utf8)) }
    }

    @Test("EmbeddedVectors.swift is generated from protocol/vectors as they are now")
    func generatedSourceIsCurrent() throws {
        let expected = try Self.generate(Self.vectorFilesOnDisk())
        if ProcessInfo.processInfo.environment["SECUREPUSH_WRITE_EMBEDDED_VECTORS"] == "1" {
            try expected.write(to: Self.sourceFile, atomically: true, encoding: .utf8)
        }
        let current = try String(contentsOf: Self.sourceFile, encoding: .utf8)
        #expect(current == expected, """
            Sources/PushConformance/EmbeddedVectors.swift differs from protocol/vectors; regenerate it with
            SECUREPUSH_WRITE_EMBEDDED_VECTORS=1 swift test --filter EmbeddedVectorsTests
            """)
    }

    @Test("the compiled-in files are the .vec files of protocol/vectors, byte for byte")
    func compiledVectorsMatchTheFiles() throws {
        let onDisk = try Self.vectorFilesOnDisk()
        #expect(EmbeddedVectors.files.map(\.name) == onDisk.map(\.name))
        for (built, file) in zip(EmbeddedVectors.files, onDisk) {
            #expect(built.text == file.text, "\(file.name) differs from its built-in copy")
        }
        #expect(onDisk.count >= 6)
    }

    @Test("without --vectors the suite uses the built-in vectors, with --vectors the directory's")
    func builtInByDefault() throws {
        let builtIn = VectorSource.load(explicit: nil)
        #expect(builtIn.directory == nil)
        #expect(builtIn.problems.isEmpty)
        #expect(builtIn.vectors.map(\.name) == VectorFiles.all.map(\.name))
        let fromDirectory = VectorSource.load(explicit: Self.vectorsDirectory.path)
        #expect(fromDirectory.directory == Self.vectorsDirectory.path)
        #expect(fromDirectory.vectors.map(\.name) == builtIn.vectors.map(\.name))
    }

    /// The source text for `files`: one raw string literal per file, with enough `#`s
    /// that nothing in the text can end it or start an escape.
    static func generate(_ files: [(name: String, text: String)]) -> String {
        var lines = [
            "// Generated from protocol/vectors/*.vec by Tests/PushConformanceTests/EmbeddedVectorsTests.swift; do not edit.",
            "// After changing the vectors: SECUREPUSH_WRITE_EMBEDDED_VECTORS=1 swift test --filter EmbeddedVectorsTests",
            "",
            "/// The golden vectors of protocol/vectors as this binary was built, so every vector case",
            "/// runs wherever the binary is installed (`--vectors DIR` reads other files instead).",
            "public enum EmbeddedVectors {",
            "    public static let files: [(name: String, text: String)] = [",
        ]
        for (name, text) in files {
            var hashes = "#"
            while text.contains("\"\"\"" + hashes) || text.contains("\\" + hashes) { hashes += "#" }
            // The literal's last line break is not part of its value: one more keeps the text's own.
            lines.append("        (\"\(name)\", \(hashes)\"\"\"")
            lines.append(text)
            lines.append("\"\"\"\(hashes)),")
        }
        lines += ["    ]", "}", ""]
        return lines.joined(separator: "\n")
    }
}
