import FoundationEssentials
import PushEventLoop

/// Where `bench http` sends: the store's HTTP API, the bearer token, and what each
/// message carries (its recipient and the device its push goes to).
struct HTTPTarget {
    let endpoint: HostPort
    let token: String
    let recipient: String
    let device: String

    /// The device the bench's messages push to (enrolled, never connected).
    static let benchDevice = "bench-http-0"
}

/// The one request a link sends over and over, encoded once.
enum HTTPRequestTemplate {
    /// The body of `POST /v1/messages` (the store's `MessagePost`).
    private struct Body: Encodable {
        struct PushOptions: Encodable {
            var device: String
            var ttl_s: UInt32
        }
        var recipient: String
        var text: String
        var ttl_s: UInt32
        var push: PushOptions
    }

    static func post(_ target: HTTPTarget, payloadSize: Int) -> [UInt8] {
        // Printable ASCII that JSON takes as is, not all one byte.
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
        let text = String(decoding: (0..<payloadSize).map { alphabet[$0 % alphabet.count] }, as: UTF8.self)
        let message = Body(recipient: target.recipient, text: text, ttl_s: StoreBenchmark.ttlSeconds,
                           push: Body.PushOptions(device: target.device, ttl_s: EndToEndBenchmark.pushTTLSeconds))
        // Strings and integers always encode.
        let body = (try? JSONEncoder().encode(message)).map(Array.init) ?? []
        let head = "POST /v1/messages HTTP/1.1\r\n"
            + "Host: \(target.endpoint)\r\n"
            + "Authorization: Bearer \(target.token)\r\n"
            + "Content-Type: application/json\r\n"
            + "Content-Length: \(body.count)\r\n"
            + "\r\n"
        return Array(head.utf8) + body
    }
}
