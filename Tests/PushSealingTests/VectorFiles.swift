import Foundation
import PushWire
import Testing

/// The files of protocol/vectors this suite reads, found from this source file's path.
enum SealingVectorFiles {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("protocol/vectors")

    static func data(_ name: String) throws -> Data { try Data(contentsOf: directory.appendingPathComponent(name)) }
}

/// Lowercase hex into bytes, failing the test on anything else.
func hexBytes(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [UInt8] {
    try #require([UInt8](hex: text), "not hex: \(text.prefix(40))", sourceLocation: sourceLocation)
}
