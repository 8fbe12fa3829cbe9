import Foundation
import Testing
import PushSecurity
import PushTestSupport
@testable import PushGateway

/// protocol/vectors/cluster-seal.txt, written by protocol/tools/gen_cluster_vectors.py from
/// CLUSTER.md alone: the Swift seal writes the same bytes and refuses the same ones.
@Suite("Gateway cluster: sealed vectors", .ownThread)
struct ClusterSealVectorTests {
    struct Vector {
        var name: String
        var subject = ""
        var sender = ""
        var sentAtMs: UInt64 = 0
        var nonce: UInt64 = 0
        var inner: [UInt8] = []
        var bytes: [UInt8] = []
        var expect = ""
    }

    static func load() throws -> (serverKey: [UInt8], clusterKey: [UInt8], vectors: [Vector]) {
        let url = VectorFiles.protocolDirectory.appendingPathComponent("vectors/cluster-seal.txt")
        var serverKey: [UInt8] = []
        var clusterKey: [UInt8] = []
        var vectors: [Vector] = []
        var current: Vector?
        for line in try String(contentsOf: url, encoding: .utf8).split(separator: "\n") where !line.hasPrefix("#") {
            let words = line.split(separator: " ", maxSplits: 1).map(String.init)
            let rest = words.count > 1 ? words[1] : ""
            switch words.first {
            case "server_key": serverKey = ClusterVector.bytes(hex: rest)
            case "cluster_key": clusterKey = ClusterVector.bytes(hex: rest)
            case "vector": current = Vector(name: rest)
            case "subject": current?.subject = rest
            case "sender": current?.sender = rest
            case "sent_at_ms": current?.sentAtMs = UInt64(rest) ?? 0
            case "nonce": current?.nonce = UInt64(rest) ?? 0
            case "inner": current?.inner = rest == "-" ? [] : ClusterVector.bytes(hex: rest)
            case "hex": current?.bytes += ClusterVector.bytes(hex: rest)
            case "expect": current?.expect = rest
            case "end":
                if let vector = current { vectors.append(vector) }
                current = nil
            default: Issue.record("cluster-seal.txt: unexpected line \(line)")
            }
        }
        return (serverKey, clusterKey, vectors)
    }

    @Test("every sealed vector opens to its inner message, and sealing that writes its bytes; the refused ones are refused for their reason")
    func vectors() throws {
        let (serverKey, clusterKey, vectors) = try Self.load()
        let key = try #require(SecretKey(bytes: serverKey))
        #expect(key.derive(purpose: ClusterSeal.keyPurpose).bytes == clusterKey)
        let seal = ClusterSeal(serverKey: key)
        #expect(vectors.count == 8)
        for vector in vectors {
            switch vector.expect {
            case "opens":
                let opened = try seal.open(vector.bytes, subject: vector.subject)
                #expect(opened == ClusterSeal.Opened(sender: vector.sender, sentAtMs: vector.sentAtMs, nonce: vector.nonce, message: vector.inner),
                        "\(vector.name)")
                #expect(seal.seal(vector.inner, subject: vector.subject, sender: vector.sender, sentAtMs: vector.sentAtMs,
                                  nonce: vector.nonce) == vector.bytes, "\(vector.name)")
            case "refused bad_tag":
                #expect(throws: ClusterAuthError.badTag, "\(vector.name)") { try seal.open(vector.bytes, subject: vector.subject) }
            case "refused unsealed":
                #expect(throws: ClusterAuthError.unsealed, "\(vector.name)") { try seal.open(vector.bytes, subject: vector.subject) }
            default:
                Issue.record("\(vector.name): unknown expectation \(vector.expect)")
            }
        }
    }
}
