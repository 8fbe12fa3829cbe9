extension Connection {
    /// Placeholder until the framer reports when an incomplete frame began.
    public var partialFrameSinceMillis: Int64? { inputBufferedBytes > 0 ? lastReadMillis : nil }
}
