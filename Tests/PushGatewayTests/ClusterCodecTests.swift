import Foundation
import Testing
import PushTestSupport
import PushWire
@testable import PushGateway

/// The tagged layout of the messages gateway nodes exchange and keep in JetStream
/// (protocol/CLUSTER.md), against the golden vectors of protocol/vectors/cluster.txt.
@Suite("Gateway cluster: message layout", .ownThread)
struct ClusterCodecTests {
    static func push(_ id: UInt8, priority: UInt8, collapse: String?, expiresIn ms: UInt64) -> ClusterPush {
        ClusterUnitTests.push(id, priority: priority, collapse: collapse, expiresIn: ms)
    }

    static let push1 = push(1, priority: 9, collapse: "score", expiresIn: 60_000)
    static let push2 = push(2, priority: 5, collapse: nil, expiresIn: 3_600_000)
    /// `push2` as a provider sent it with `user` and `once` ([4.13-11], [4.13-12]).
    static let push2UserOnce: ClusterPush = {
        var push = push2
        push.user = "alice"
        push.once = true
        return push
    }()
    static let heartbeat = NodeHeartbeat(node: "g1", boot: 42, devices: 7, wantsPresence: true)
    static let record = QueueRecord(user: "alice", enrolment: 1_699_999_000_000, missed: 3, entries: [
        .init(push: push1, returned: true, rank: 2),
        .init(push: push2, returned: false, rank: 7),
    ])

    /// The value each vector that is not refused stands for, by name.
    static let expected: [String: ClusterMessage] = [
        "heartbeat": .heartbeat(heartbeat),
        "heartbeat_zero_integers": .heartbeat(NodeHeartbeat(node: "g-2", boot: 0, devices: 0, wantsPresence: false)),
        "heartbeat_widest_boot": .heartbeat(NodeHeartbeat(node: "g3", boot: .max, devices: 1, wantsPresence: false)),
        "heartbeat_node_of_loops": .heartbeat(NodeHeartbeat(node: "g1", boot: 42, devices: 7, wantsPresence: true, loops: 4)),
        "presence": .presence(PresenceBatch(node: "g2", boot: 5, changes: [
            PresenceChange(deviceID: "phone", online: true, stamp: 9, user: "alice", tags: ["news", "sport"]),
            PresenceChange(deviceID: "tablet", online: false, stamp: 3, user: "bob", tags: []),
        ])),
        "forward_batch": .forward(ForwardBatch(id: 77, pushes: [ForwardedPush(push: push1, deviceIDs: ["a", "b", "ü"]),
                                                               ForwardedPush(push: push2, deviceIDs: ["c"])])),
        "forward_replies": .replies(ForwardReplies(id: .max, counts: [.init(written: 3, queued: .max), .init(written: 0, queued: 1)])),
        "take_notice": .take(TakeNotice(deviceIDs: ["phone", "tablet"])),
        "forward_batch_user_once": .forward(ForwardBatch(id: 78, pushes: [ForwardedPush(push: push2UserOnce, deviceIDs: ["a"]),
                                                                         ForwardedPush(push: push1, deviceIDs: ["b"])])),
        "forward_batch_unknown_push_field": .forward(ForwardBatch(id: 78, pushes: [ForwardedPush(push: push2UserOnce, deviceIDs: ["a"])])),
        "queue_record_once": .record(QueueRecord(user: "alice", entries: [
            .init(push: push2UserOnce.queued, returned: false, rank: 1),
            .init(push: push1, returned: false, rank: 2),
        ])),
        "take_notice_empty": .take(TakeNotice(deviceIDs: [])),
        "queue_record": .record(record),
        "queue_record_long_entry": .record(QueueRecord(user: "carol", entries: [
            .init(push: ClusterPush(frameBody: [0x15, 0x81, 0x01] + (0..<129).map { UInt8($0) }, priority: 0, collapseKey: "",
                                    expiresAtWallMs: 0), returned: false, rank: 1),
        ])),
        "queue_record_untagged": .record(record),
        "queue_record_untagged_missed_only": .record(QueueRecord(user: "bob", missed: 1)),
        "heartbeat_unknown_fields": .heartbeat(heartbeat),
        "heartbeat_padded_lengths": .heartbeat(heartbeat),
        "presence_unknown_nested_field": .presence(PresenceBatch(node: "g2", boot: 5, changes: [
            PresenceChange(deviceID: "phone", online: true, stamp: 9, user: "alice", tags: []),
        ])),
        "queue_record_missing_fields": .record(QueueRecord(user: "dave", entries: [
            .init(push: ClusterPush(frameBody: push2.frameBody, priority: 0, collapseKey: nil, expiresAtWallMs: 0), returned: false, rank: 0),
        ])),
    ]

    @Test("every golden cluster vector decodes to its value, and re-encodes to its bytes where it is this build's encoding")
    func goldenVectors() throws {
        let vectors = try ClusterVector.load()
        #expect(vectors.count >= 20)
        #expect(Set(vectors.map(\.name)).count == vectors.count, "vector names are unique")
        let readable = Set(vectors.filter { !$0.expect.hasPrefix("refused") }.map(\.name))
        #expect(readable == Set(Self.expected.keys), "every readable vector has its value here, and only those")
        for vector in vectors {
            let decoded = Result { () throws(ClusterDecodeError) in try ClusterMessage(type: vector.type, decoding: vector.bytes) }
            switch vector.expect {
            case "encoding", "decodes":
                let value = try #require(Self.expected[vector.name], "\(vector.name)")
                #expect(try decoded.get() == value, "\(vector.name)")
                if vector.expect == "encoding" {
                    #expect(value.encoded == vector.bytes, "\(vector.name) encodes to the vector's bytes")
                }
            default:
                let refusal = try #require(ClusterVector.refusal(vector.expect), "\(vector.name): \(vector.expect)")
                switch decoded {
                case .success(let value): Issue.record("\(vector.name) was read as \(value)")
                case .failure(let error): #expect(refusal(error), "\(vector.name) refused with \(error)")
                }
            }
        }
    }

    @Test("a queue record in the untagged layout of the previous build is read, and written back tagged")
    func untaggedQueueRecord() throws {
        // QueueRecord.encoded() of `record` by the build before the tagged layout (f8107af).
        let previous = ClusterVector.bytes(hex: "0105616c696365c0cbd8febc3103020d150101330109340573636f726509010573636f7265"
                                               + "e0a499ffbc310102031501020500" + "80adf180bd310007")
        let read = try QueueRecord(decoding: previous)
        #expect(read == Self.record)
        let written = read.encoded()
        #expect(written.first == ClusterMessages.version, "writers write only the tagged layout")
        #expect(try QueueRecord(decoding: written) == Self.record)
        // A record a node queued into before the upgrade takes new pushes under the same rules.
        let (appended, _) = read.appending(Self.push(3, priority: 5, collapse: nil, expiresIn: 1_000), for: read.owner,
                                          capacity: 8, nowWallMs: ClusterUnitTests.wallNow)
        #expect(ClusterUnitTests.ids(appended) == [1, 2, 3])
        for length in 1..<previous.count {
            #expect(throws: ClusterDecodeError.self) { try QueueRecord(decoding: Array(previous.prefix(length))) }
        }
    }

    @Test("writers write the current version and readers refuse any other, as a whole")
    func versions() throws {
        #expect(ClusterMessages.version == 2)
        for message in Self.expected.values {
            var bytes = message.encoded
            #expect(bytes.first == ClusterMessages.version)
            bytes[0] = ClusterMessages.version + 1
            #expect(throws: ClusterDecodeError.unknownVersion(ClusterMessages.version + 1)) {
                try ClusterMessage(type: message.type, decoding: bytes)
            }
        }
        // Only queue records, which JetStream keeps across an upgrade, are read in the untagged layout.
        #expect(throws: ClusterDecodeError.unknownVersion(1)) { try NodeHeartbeat(decoding: [1, 2, 0x67, 0x31, 42, 7, 1]) }
        #expect(try QueueRecord(decoding: []).isEmpty, "an empty message is an empty queue")
    }

    @Test("no input breaks a decoder: every truncation is refused, and mangled bytes are refused or read whole")
    func hostileInput() throws {
        var random = SystemRandomNumberGenerator()
        for message in Self.expected.values where message.encoded.count > ClusterWriter.headerSize {
            let sample = message.encoded
            // An empty queue record is an empty queue, what a node writes when it takes one.
            for length in (message.type == "QueueRecord" ? 1 : 0)..<sample.count {
                #expect(throws: ClusterDecodeError.self) { try ClusterMessage(type: message.type, decoding: Array(sample.prefix(length))) }
            }
            var readWhole = 0
            for round in 0..<1_500 {
                var bytes: [UInt8]
                if round % 2 == 0 {
                    bytes = sample
                    for _ in 0...Int.random(in: 0...3, using: &random) {
                        bytes[Int.random(in: ClusterWriter.headerSize..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                    }
                } else {
                    let body = (0..<Int.random(in: 0...48, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                    bytes = [ClusterMessages.version, 0, 0, 0, UInt8(body.count)] + body
                }
                guard let value = try? ClusterMessage(type: message.type, decoding: bytes) else { continue }
                readWhole += 1
                // What was read is a whole message: it survives its own encoding.
                #expect(try ClusterMessage(type: message.type, decoding: value.encoded) == value, "from \(bytes)")
            }
            #expect(readWhole > 0, "some mangled \(message.type) messages are still read (unknown fields skipped)")
        }
        // Lengths far beyond the bytes present fail at once instead of reserving memory.
        let huge: [UInt8] = [ClusterMessages.version, 0, 0, 0, 5, 0x06, 0xFF, 0xFF, 0xFF, 0x7F]
        #expect(throws: ClusterDecodeError.truncated) { try TakeNotice(decoding: huge) }
        #expect(throws: ClusterDecodeError.truncated) { try QueueRecord(decoding: [1, 0x01, 0x61, 0, 0, 0xFF, 0xFF, 0xFF, 0x7F]) }
    }
}

/// Any cluster message, for tests that go over all of them.
enum ClusterMessage: Equatable {
    case heartbeat(NodeHeartbeat)
    case presence(PresenceBatch)
    case forward(ForwardBatch)
    case replies(ForwardReplies)
    case take(TakeNotice)
    case record(QueueRecord)

    init(type: String, decoding bytes: [UInt8]) throws(ClusterDecodeError) {
        switch type {
        case "NodeHeartbeat": self = .heartbeat(try NodeHeartbeat(decoding: bytes))
        case "PresenceBatch": self = .presence(try PresenceBatch(decoding: bytes))
        case "ForwardBatch": self = .forward(try ForwardBatch(decoding: bytes))
        case "ForwardReplies": self = .replies(try ForwardReplies(decoding: bytes))
        case "TakeNotice": self = .take(try TakeNotice(decoding: bytes))
        case "QueueRecord": self = .record(try QueueRecord(decoding: bytes))
        default: preconditionFailure("no cluster message \(type)")
        }
    }

    var type: String {
        switch self {
        case .heartbeat: "NodeHeartbeat"
        case .presence: "PresenceBatch"
        case .forward: "ForwardBatch"
        case .replies: "ForwardReplies"
        case .take: "TakeNotice"
        case .record: "QueueRecord"
        }
    }

    var encoded: [UInt8] {
        switch self {
        case .heartbeat(let message): message.encoded()
        case .presence(let message): message.encoded()
        case .forward(let message): message.encoded()
        case .replies(let message): message.encoded()
        case .take(let message): message.encoded()
        case .record(let message): message.encoded()
        }
    }
}

/// One vector of protocol/vectors/cluster.txt.
struct ClusterVector {
    var name: String
    var type = ""
    var bytes: [UInt8] = []
    var expect = ""

    static func load() throws -> [ClusterVector] {
        let url = VectorFiles.protocolDirectory.appendingPathComponent("vectors/cluster.txt")
        var vectors: [ClusterVector] = []
        var current: ClusterVector?
        for line in try String(contentsOf: url, encoding: .utf8).split(separator: "\n") where !line.hasPrefix("#") {
            let words = line.split(separator: " ", maxSplits: 1).map(String.init)
            let rest = words.count > 1 ? words[1] : ""
            switch words.first {
            case "vector": current = ClusterVector(name: rest)
            case "message": current?.type = rest
            case "hex": current?.bytes += bytes(hex: rest)
            case "expect": current?.expect = rest
            case "end":
                if let vector = current { vectors.append(vector) }
                current = nil
            default: Issue.record("cluster.txt: unexpected line \(line)")
            }
        }
        return vectors
    }

    static func bytes(hex: String) -> [UInt8] {
        let digits = Array(hex.filter { !$0.isWhitespace }.utf8)
        return stride(from: 0, to: digits.count - 1, by: 2).map {
            guard let byte = UInt8(String(decoding: digits[$0...$0 + 1], as: UTF8.self), radix: 16) else {
                Issue.record("not hex: \(hex)")
                return 0
            }
            return byte
        }
    }

    /// Which errors a `refused ...` expectation admits.
    static func refusal(_ expect: String) -> ((ClusterDecodeError) -> Bool)? {
        let words = expect.split(separator: " ").map(String.init)
        switch words.dropFirst().first {
        case "truncated": return { $0 == .truncated }
        case "out_of_range": return { $0 == .outOfRange }
        case "unknown_version": return { if case .unknownVersion = $0 { true } else { false } }
        case "missing_field":
            guard words.count == 3, let tag = UInt8(words[2].dropFirst(2), radix: 16) else { return nil }
            return { $0 == .missingField(ClusterTag(rawValue: tag)) }
        default: return nil
        }
    }
}
