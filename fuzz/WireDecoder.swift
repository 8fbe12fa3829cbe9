import PushWire

// libFuzzer target over the PushWire decoder: the bytes of one input are a stream of
// frames, decoded three ways that must agree — in place in one chunk, in place split at
// points drawn from the input, and through the copying feed/next path — and every frame
// that decodes as a message must decode the same after being encoded again.
//
// Input: byte 0 picks the maximum frame size, bytes 1...4 seed the split points, the
// rest is the stream.

enum Outcome: Equatable {
    case frame(FrameHeader, [UInt8])
    case failed(WireError)
}

let maxFrames = [1024, 4096, FrameLimits.defaultMaxFrame, 1 << 20]

/// Frames delivered in place from `chunks`, then the error that stopped the decoder, if any.
func decodeInPlace(_ chunks: [ArraySlice<UInt8>], maxFrame: Int) -> [Outcome] {
    var decoder = FrameDecoder(maxFrame: maxFrame)
    var out: [Outcome] = []
    for chunk in chunks {
        let failure: WireError? = chunk.withUnsafeBytes { bytes in
            do throws(WireError) {
                try decoder.decode(bytes) { header, body in
                    out.append(.frame(header, Array(body)))
                    return true
                }
                return nil
            } catch {
                return error
            }
        }
        if let failure {
            out.append(.failed(failure))
            return out
        }
        _ = decoder.holdsPartialFrame
    }
    return out
}

func decodeCopying(_ stream: ArraySlice<UInt8>, maxFrame: Int) -> [Outcome] {
    var decoder = FrameDecoder(maxFrame: maxFrame)
    var out: [Outcome] = []
    stream.withUnsafeBytes { decoder.feed($0) }
    do throws(WireError) {
        while let frame = try decoder.next() { out.append(.frame(frame.header, frame.body)) }
    } catch {
        out.append(.failed(error))
    }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWireDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 5 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let maxFrame = maxFrames[Int(input[0]) % maxFrames.count]
    var random = SplitMix(state: UInt64(input[1]) << 24 | UInt64(input[2]) << 16 | UInt64(input[3]) << 8 | UInt64(input[4]))
    let stream = input[5...]

    let whole = decodeInPlace([stream], maxFrame: maxFrame)
    var chunks: [ArraySlice<UInt8>] = []
    var start = stream.startIndex
    while start < stream.endIndex {
        let length = Int(random.next() % 40) + 1
        let end = min(stream.endIndex, start + length)
        chunks.append(stream[start..<end])
        start = end
    }
    let split = decodeInPlace(chunks, maxFrame: maxFrame)
    let copied = decodeCopying(stream, maxFrame: maxFrame)
    precondition(whole == split, "in-place decoding depends on where the stream is split")
    precondition(whole == copied, "in-place and copying decoding disagree")

    for case .frame(let header, let body) in whole {
        let decoded = body.withUnsafeBytes { raw in
            Result { () throws(WireError) -> Message in try Message.decode(header: header, body: raw) }
        }
        guard case .success(let message) = decoded else { continue }
        let again = message.encoded(correlation: header.correlation)
        var decoder = FrameDecoder(maxFrame: FrameLimits.ceiling)
        decoder.feed(again)
        guard let frame = try? decoder.next(), let reparsed = try? Message.decode(frame) else {
            preconditionFailure("a decoded \(message.type) does not decode after encoding")
        }
        precondition(reparsed == message, "\(message.type) changed in an encode/decode round trip")
        precondition(frame.header.correlation == header.correlation && frame.header.rawType == header.rawType,
                     "the header changed in an encode/decode round trip")
    }
    return 0
}
