import PushWire

/// What a server answers to HELLO before any credential is looked at.
public enum HelloVerdict: Equatable, Sendable {
    case accept(HelloOK)
    /// GOAWAY with this status, then close ([5.2-1]).
    case fatal(Status, String)
    /// ERROR with this status, then close ([5.1-3]).
    case refuse(Status, String)
}

public enum HelloNegotiation {
    /// Version, frame size and in-flight limits ([5.2-1], [5.2-3], [5.2-4], [5.2-6]).
    public static func negotiate(_ hello: Hello, limits: ServiceLimits, overConnectionLimit: Bool) -> HelloVerdict {
        guard hello.versionMin <= FrameHeader.version, FrameHeader.version <= hello.versionMax else {
            return .fatal(.unsupportedVersion, "this server speaks protocol version 1 only")
        }
        if overConnectionLimit { return .refuse(.busy, "the server is at its connection limit") }
        let proposedFrame = Int(hello.maxFrame ?? UInt32(FrameLimits.defaultMaxFrame))
        guard proposedFrame >= FrameLimits.floor else { return .refuse(.badRequest, "max_frame below 1024") }
        guard hello.maxInflight != 0 else { return .refuse(.badRequest, "max_inflight of 0") }
        let inflight = min(limits.maxInflight, hello.maxInflight ?? limits.maxInflight)
        return .accept(HelloOK(maxFrame: UInt32(min(proposedFrame, limits.maxFrame, FrameLimits.ceiling)),
                               keepaliveMs: limits.keepaliveMs, maxInflight: inflight, name: limits.name))
    }
}
