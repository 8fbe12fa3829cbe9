/// Turns a byte stream into frames, however the bytes are split (SPEC.md section 2).
///
/// It knows nothing of sockets. Two ways to use it:
/// - `decode(_:maxFrame:_:)`: hand it each chunk as it arrives; whole frames inside the
///   chunk are delivered in place, as pointers into the chunk, and only bytes that cannot
///   be delivered yet (an incomplete trailing frame, or what follows a frame after which
///   the receiver asked to stop) are copied into the decoder. This is the server read path.
/// - `feed(_:)` and `next()`: copy bytes in, pull copied frames out. For tests and the
///   blocking client.
///
/// The header is validated as soon as its 16 bytes are in, so an oversized length is
/// refused before any of its body is buffered or allocated. After a fatal error the
/// decoder stays failed: the stream can no longer be trusted.
public struct FrameDecoder {
    /// The limit `next()` and `decode(_:_:)` apply; `decode(_:maxFrame:_:)` takes its own.
    public var maxFrame: Int
    /// Bytes kept between chunks; those before `carryStart` were delivered already.
    @usableFromInline var carry: [UInt8] = []
    @usableFromInline var carryStart = 0
    @usableFromInline var failure: WireError?

    /// A carry buffer this small is kept when it empties; a bigger one is freed, so a
    /// connection between frames holds (almost) nothing.
    @usableFromInline static let retainedCapacity = 128

    public init(maxFrame: Int = FrameLimits.defaultMaxFrame) {
        self.maxFrame = maxFrame
    }

    /// Bytes received but not yet returned as a frame.
    public var bufferedByteCount: Int { carry.count - carryStart }

    /// The bytes held and not yet delivered, in order: what a connection moving to another
    /// loop takes with it.
    public var bufferedBytes: [UInt8] { Array(carry[carryStart...]) }

    /// The framing error that stopped the decoder, if one did.
    public var error: WireError? { failure }

    /// True when the buffered bytes end inside a frame (header or body) that has not
    /// fully arrived. Whole frames held back by a stop do not count.
    public var holdsPartialFrame: Bool {
        var index = carryStart
        while carry.count - index >= FrameHeader.size {
            let length = Int(carry[index + 12]) << 24 | Int(carry[index + 13]) << 16
                | Int(carry[index + 14]) << 8 | Int(carry[index + 15])
            index += FrameHeader.size + length
        }
        return index != carry.count
    }

    /// Drops whatever is buffered (a failure stays). For an owner that is done with the stream.
    public mutating func discardBuffered() {
        carry = []
        carryStart = 0
    }

    // MARK: - In place

    /// Delivers every whole frame that `chunk` completes, in order: first any frame begun
    /// in earlier chunks (from the decoder's own buffer), then the frames inside `chunk`
    /// in place. `deliver` gets the header and a body valid only during the call, and
    /// returns whether to go on; when it returns false the bytes after that frame are kept
    /// for the next call (pass an empty chunk to resume with nothing new).
    ///
    /// `maxFrame` is evaluated before each header, so `deliver` may change the limit it
    /// reads (after HELLO, say) and the change applies from the next frame. Frames that
    /// precede a framing error are delivered before the error is thrown. Bytes kept after
    /// a stop are validated when they are delivered.
    @inlinable
    public mutating func decode(
        _ chunk: UnsafeRawBufferPointer, maxFrame: @autoclosure () -> Int,
        _ deliver: (FrameHeader, UnsafeRawBufferPointer) -> Bool
    ) throws(WireError) {
        if let failure { throw failure }
        var offset = 0
        while carryStart < carry.count {
            switch try deliverCarried(chunk, &offset, maxFrame(), deliver) {
            case .delivered:
                continue
            case .stopped:
                keep(chunk, from: offset)
                return
            case .needMore:
                return
            }
        }
        while chunk.count - offset >= FrameHeader.size {
            let header = try parseHeader(UnsafeRawBufferPointer(rebasing: chunk[offset ..< offset + FrameHeader.size]),
                                         maxFrame: maxFrame())
            let end = offset + header.frameLength
            guard end <= chunk.count else { break }
            let goOn = deliver(header, UnsafeRawBufferPointer(rebasing: chunk[offset + FrameHeader.size ..< end]))
            offset = end
            if !goOn { break }
        }
        if offset < chunk.count { keep(chunk, from: offset) }
    }

    /// `decode(_:maxFrame:_:)` with this decoder's `maxFrame`, fixed for the call.
    @inlinable
    public mutating func decode(
        _ chunk: UnsafeRawBufferPointer, _ deliver: (FrameHeader, UnsafeRawBufferPointer) -> Bool
    ) throws(WireError) {
        let limit = maxFrame
        try decode(chunk, maxFrame: limit, deliver)
    }

    @usableFromInline enum CarryStep { case delivered, stopped, needMore }

    /// Completes and delivers the frame at the front of the carry buffer, topping it up
    /// from `chunk` (header first, then body) as far as needed and available.
    @inlinable
    mutating func deliverCarried(
        _ chunk: UnsafeRawBufferPointer, _ offset: inout Int, _ maxFrame: Int,
        _ deliver: (FrameHeader, UnsafeRawBufferPointer) -> Bool
    ) throws(WireError) -> CarryStep {
        // A front frame shorter than its length is the last thing buffered, so topping up
        // appends to that frame.
        if bufferedByteCount < FrameHeader.size {
            take(chunk, &offset, count: FrameHeader.size - bufferedByteCount)
            if bufferedByteCount < FrameHeader.size { return .needMore }
        }
        let start = carryStart
        let parsed = carry.withUnsafeBytes { raw in
            Result { () throws(WireError) -> FrameHeader in
                try FrameHeader.parse(UnsafeRawBufferPointer(rebasing: raw[start ..< start + FrameHeader.size]),
                                      maxFrame: maxFrame)
            }
        }
        let header: FrameHeader
        switch parsed {
        case .success(let value): header = value
        case .failure(let error): throw fail(error)
        }
        let length = header.frameLength
        if bufferedByteCount < length {
            take(chunk, &offset, count: length - bufferedByteCount)
            if bufferedByteCount < length { return .needMore }
        }
        // Topping up may have moved the frame to the front.
        let frameStart = carryStart
        let goOn = carry.withUnsafeBytes { raw in
            deliver(header, UnsafeRawBufferPointer(rebasing: raw[frameStart + FrameHeader.size ..< frameStart + length]))
        }
        carryStart += length
        if carryStart == carry.count { releaseCarry() }
        return goOn ? .delivered : .stopped
    }

    @inlinable
    mutating func parseHeader(_ bytes: UnsafeRawBufferPointer, maxFrame: Int) throws(WireError) -> FrameHeader {
        do throws(WireError) {
            return try FrameHeader.parse(bytes, maxFrame: maxFrame)
        } catch {
            throw fail(error)
        }
    }

    /// Moves up to `count` bytes of `chunk` from `offset` into the carry buffer.
    @inlinable
    mutating func take(_ chunk: UnsafeRawBufferPointer, _ offset: inout Int, count: Int) {
        let end = offset + min(count, chunk.count - offset)
        guard end > offset else { return }
        append(UnsafeRawBufferPointer(rebasing: chunk[offset ..< end]))
        offset = end
    }

    @inlinable
    mutating func keep(_ chunk: UnsafeRawBufferPointer, from offset: Int) {
        append(UnsafeRawBufferPointer(rebasing: chunk[offset...]))
    }

    @usableFromInline
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        if carryStart > 0 {
            carry.removeSubrange(0 ..< carryStart)
            carryStart = 0
        }
        carry.append(contentsOf: UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: bytes.count))
    }

    @usableFromInline
    mutating func releaseCarry() {
        carry.removeAll(keepingCapacity: carry.capacity <= FrameDecoder.retainedCapacity)
        carryStart = 0
    }

    @usableFromInline
    mutating func fail(_ error: WireError) -> WireError {
        failure = error
        carry = []
        carryStart = 0
        return error
    }

    // MARK: - Copying

    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        guard failure == nil, let base = bytes.baseAddress, !bytes.isEmpty else { return }
        compactIfWorthIt()
        carry.append(contentsOf: UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: bytes.count))
    }

    public mutating func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// The next whole frame, nil if more bytes are needed, or the framing error.
    public mutating func next() throws(WireError) -> Frame? {
        if let failure { throw failure }
        guard bufferedByteCount >= FrameHeader.size else { return nil }
        let start = carryStart
        let limit = maxFrame
        let parsed = carry.withUnsafeBytes { raw in
            Result { () throws(WireError) -> FrameHeader in
                try FrameHeader.parse(UnsafeRawBufferPointer(rebasing: raw[start ..< start + FrameHeader.size]), maxFrame: limit)
            }
        }
        let header: FrameHeader
        switch parsed {
        case .success(let value): header = value
        case .failure(let error): throw fail(error)
        }
        guard bufferedByteCount >= header.frameLength else { return nil }
        let bodyStart = start + FrameHeader.size
        let body = Array(carry[bodyStart ..< bodyStart + Int(header.bodyLength)])
        carryStart += header.frameLength
        if carryStart == carry.count { releaseCarry() }
        return Frame(header: header, body: body)
    }

    /// Drops consumed bytes once they are the larger part of the buffer, so a long stream
    /// costs amortized O(1) per byte without growing without bound.
    private mutating func compactIfWorthIt() {
        if carryStart == carry.count {
            releaseCarry()
        } else if carryStart > 4096 && carryStart * 2 > carry.count {
            carry.removeSubrange(0 ..< carryStart)
            carryStart = 0
        }
    }
}
