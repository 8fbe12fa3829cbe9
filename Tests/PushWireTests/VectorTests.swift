import Foundation
import Testing
import PushWire
import PushTestSupport

@Suite("Golden vectors")
struct VectorTests {
    @Test("[9-1] the spec ships at least 30 vectors, naming real clauses and every message type")
    func inventory() {
        let vectors = VectorFiles.all
        #expect(VectorFiles.parseErrors.isEmpty, "\(VectorFiles.parseErrors)")
        #expect(vectors.count >= 30)
        #expect(Set(vectors.map(\.name)).count == vectors.count, "vector names are unique")
        var typesSeen = Set<MessageType>()
        for vector in vectors {
            #expect(!vector.clauses.isEmpty, "\(vector.name) cites a clause")
            for clause in vector.clauses {
                #expect(VectorFiles.clauseIDs.contains(clause), "\(vector.name) cites unknown clause \(clause)")
            }
            if case .message(let type, _, _, _) = vector.expectation { typesSeen.insert(type) }
        }
        #expect(typesSeen == Set(MessageType.allCases))
    }

    @Test("each vector decodes to its documented outcome", arguments: VectorFiles.all)
    func outcome(vector: TestVector) throws {
        let outcome = TestVector.decode(chunks: [vector.bytes], maxFrame: vector.maxFrame)
        switch vector.expectation {
        case .incomplete:
            #expect(outcome == .incomplete)
        case .fatal(let status):
            #expect(outcome == .fatal(status))
            #expect(status.isFatal)
        case .requestError(let status):
            #expect(outcome == .requestError(status))
            #expect(!status.isFatal)
            #expect(MessageType(rawValue: vector.bytes[2])?.isRequest != false, "\(vector.name): request_error on a reply or one-way message [9-6]")
        case .rejected(let status):
            #expect(outcome == .rejected(status))
            #expect(!status.isFatal)
            #expect(MessageType(rawValue: vector.bytes[2])?.isRequest == false, "\(vector.name): rejected on a request [9-7]")
        case .message(let type, let correlation, let status, let fields):
            guard case .messages(let messages) = outcome, messages.count == 1, let message = messages.first else {
                Issue.record("\(vector.name): expected one \(type), got \(outcome)")
                return
            }
            #expect(message.type == type)
            #expect(message.status == status)
            let header = try vector.bytes.withUnsafeBytes { try FrameHeader.parse($0, maxFrame: vector.maxFrame) }
            #expect(header.correlation == correlation)
            let wireFields = try vector.bytes.withUnsafeBytes { raw in
                try FieldSet.listAll(in: UnsafeRawBufferPointer(rebasing: raw[FrameHeader.size...]))
            }
            #expect(wireFields.map(\.tag.frameName) == fields.map(\.0))
            #expect(wireFields.map(\.value) == fields.map(\.1))
        }
    }

    @Test("each vector gives the same outcome byte by byte and split at every offset", arguments: VectorFiles.all)
    func splits(vector: TestVector) {
        let whole = TestVector.decode(chunks: [vector.bytes], maxFrame: vector.maxFrame)
        #expect(TestVector.decode(chunks: vector.bytes.map { [$0] }, maxFrame: vector.maxFrame) == whole)
        for cut in 0...vector.bytes.count {
            let chunks = [Array(vector.bytes[..<cut]), Array(vector.bytes[cut...])]
            #expect(TestVector.decode(chunks: chunks, maxFrame: vector.maxFrame) == whole, "\(vector.name) cut at \(cut)")
        }
    }

    @Test("a valid vector re-encodes to the same message, and to its exact bytes when canonical", arguments: VectorFiles.all)
    func reencode(vector: TestVector) throws {
        guard case .message(_, let correlation, _, let fields) = vector.expectation,
              fields.allSatisfy({ FieldTag(name: $0.0)?.isKnown == true }),
              case .messages(let messages) = TestVector.decode(chunks: [vector.bytes], maxFrame: vector.maxFrame),
              let message = messages.first else { return }
        let names = fields.map(\.0)
        let sortedTags = names.compactMap { FieldTag(name: $0)?.rawValue }
        // Only canonical vectors: ascending order and no field equal to its default.
        guard sortedTags == sortedTags.sorted() else { return }
        let reencoded = message.encoded(correlation: correlation)
        #expect(TestVector.decode(chunks: [reencoded], maxFrame: FrameLimits.ceiling) == .messages([message]))
        // Encoders leave defaults off the wire, so a vector spelling a default out is longer.
        if reencoded.count == vector.bytes.count {
            #expect(reencoded == vector.bytes, "\(vector.name)")
        }
    }
}

extension TestVector: CustomTestStringConvertible {
    public var testDescription: String { name }
}
