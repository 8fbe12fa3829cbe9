import CNats
import Glibc

/// A received message, copied out of libnats: valid after the handler returns.
public struct NATSMessage: Sendable {
    public let subject: String
    public let reply: String?
    public let data: [UInt8]
    /// Every header in order, repeated names included; a status message's code and text
    /// appear as libnats reports them, under "Status" and "Description".
    public let headers: [(String, String)]

    public init(subject: String, reply: String? = nil, data: [UInt8], headers: [(String, String)] = []) {
        self.subject = subject
        self.reply = reply
        self.data = data
        self.headers = headers
    }

    /// The first value of header `name` (exact match first, then case-insensitive, as
    /// HTTP-style header names are).
    public func header(_ name: String) -> String? {
        if let exact = headers.first(where: { $0.0 == name }) { return exact.1 }
        let lowered = name.lowercased()
        return headers.first { $0.0.lowercased() == lowered }?.1
    }

    /// The status of a header-only status message (503 no responders, 404 not found, 408
    /// request timeout), else nil.
    public var status: Int? {
        guard data.isEmpty, let text = header("Status"), text.utf8.count == 3 else { return nil }
        return Int(text)
    }

    /// Copies `message` (which the caller still owns and destroys).
    init(copying message: OpaquePointer) {
        subject = natsMsg_GetSubject(message).map { String(cString: $0) } ?? ""
        let replyText = natsMsg_GetReply(message).map { String(cString: $0) } ?? ""
        reply = replyText.isEmpty ? nil : replyText
        let length = Int(natsMsg_GetDataLength(message))
        if length > 0, let bytes = natsMsg_GetData(message) {
            data = bytes.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
        } else {
            data = []
        }
        headers = NATSMessage.copyHeaders(message)
    }

    private static func copyHeaders(_ message: OpaquePointer) -> [(String, String)] {
        var keys: UnsafeMutablePointer<UnsafePointer<CChar>?>?
        var keyCount: Int32 = 0
        // NATS_NOT_FOUND when there are no headers; the arrays (not the strings) are ours.
        guard natsMsgHeader_Keys(message, &keys, &keyCount) == NATS_OK, let keys else { return [] }
        defer { free(keys) }
        var result: [(String, String)] = []
        for index in 0..<Int(keyCount) {
            guard let key = keys[index] else { continue }
            let name = String(cString: key)
            var values: UnsafeMutablePointer<UnsafePointer<CChar>?>?
            var valueCount: Int32 = 0
            guard natsMsgHeader_Values(message, key, &values, &valueCount) == NATS_OK, let values else { continue }
            for valueIndex in 0..<Int(valueCount) {
                result.append((name, values[valueIndex].map { String(cString: $0) } ?? ""))
            }
            free(values)
        }
        return result
    }
}
