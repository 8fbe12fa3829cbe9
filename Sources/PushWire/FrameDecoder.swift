/// Turns a byte stream into frames, however the bytes are split (SPEC.md section 2).
///
/// It knows nothing of sockets: feed it whatever arrived and pull frames until it returns
/// nil. The header is validated as soon as its 16 bytes are in, so an oversized length
/// is refused before any of its body is buffered or allocated. After a fatal error the
/// decoder stays failed: the stream can no longer be trusted.
public struct FrameDecoder {
    public var maxFrame: Int
    private var buffer: [UInt8] = []
    private var readIndex = 0
    private var failure: WireError?

    public init(maxFrame: Int = FrameLimits.defaultMaxFrame) {
        self.maxFrame = maxFrame
    }

    /// Bytes received but not yet returned as a frame.
    public var bufferedByteCount: Int { buffer.count - readIndex }

    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        guard failure == nil else { return }
        compactIfWorthIt()
        buffer.append(contentsOf: bytes)
    }

    public mutating func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// The next whole frame, nil if more bytes are needed, or the framing error.
    public mutating func next() throws(WireError) -> Frame? {
        if let failure { throw failure }
        guard bufferedByteCount >= FrameHeader.size else { return nil }
        let start = readIndex
        let parsed: Result<FrameHeader, WireError> = buffer.withUnsafeBytes { raw in
            Result { () throws(WireError) -> FrameHeader in
                try FrameHeader.parse(UnsafeRawBufferPointer(rebasing: raw[start..<start + FrameHeader.size]), maxFrame: maxFrame)
            }
        }
        let header: FrameHeader
        switch parsed {
        case .success(let value): header = value
        case .failure(let error):
            failure = error
            buffer = []
            readIndex = 0
            throw error
        }
        guard bufferedByteCount >= header.frameLength else { return nil }
        let bodyStart = start + FrameHeader.size
        let body = Array(buffer[bodyStart..<bodyStart + Int(header.bodyLength)])
        readIndex += header.frameLength
        return Frame(header: header, body: body)
    }

    /// Drops consumed bytes once they are the larger part of the buffer, so a long stream
    /// costs amortized O(1) per byte without growing without bound.
    private mutating func compactIfWorthIt() {
        if readIndex == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            readIndex = 0
        } else if readIndex > 4096 && readIndex * 2 > buffer.count {
            buffer.removeSubrange(0..<readIndex)
            readIndex = 0
        }
    }
}
