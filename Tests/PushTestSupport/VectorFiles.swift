import Foundation
import PushWire

/// The golden vectors of protocol/vectors, read from the files the spec ships.
public enum VectorFiles {
    public static let protocolDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol")

    public static var all: [TestVector] { loaded.vectors }
    /// Files that did not parse, with the reason; the inventory test requires none.
    public static var parseErrors: [String] { loaded.errors }

    private static let loaded: (vectors: [TestVector], errors: [String]) = {
        let directory = protocolDirectory.appendingPathComponent("vectors")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        var vectors: [TestVector] = []
        var errors: [String] = []
        for name in names.filter({ $0.hasSuffix(".vec") }).sorted() {
            do {
                let text = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
                vectors += try TestVector.parseFile(text)
            } catch {
                errors.append("\(name): \(error)")
            }
        }
        return (vectors, errors)
    }()

    public static let clauseIDs: Set<String> = {
        let url = protocolDirectory.appendingPathComponent("clauses.txt")
        let text = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
        return Set(text.split(separator: "\n").compactMap { $0.split(separator: "\t").first.map(String.init) })
    }()
}

