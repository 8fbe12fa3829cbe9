extension MetricsSnapshot {
    /// Several loops' snapshots as one, for a process whose loops each keep a registry
    /// built by the same code.
    ///
    /// Families are matched by name and series within a family by their label string;
    /// matched values are added (counters, gauges, and histograms bucket by bucket with
    /// their sums and counts). A family or series in only one snapshot passes through, so
    /// metrics registered on one loop alone (process_*, build info) appear once.
    /// Families come in the first snapshot's order, then each later snapshot's new ones;
    /// series likewise.
    ///
    /// What cannot be added is left out rather than trapping, since the snapshots may come
    /// from code built apart: a family whose kind or help differs from the first one of
    /// its name is skipped, as is a series whose sample cannot be added to the first one
    /// of its labels (a histogram with other bounds, a value against a histogram).
    /// Repeated labels within one family are added together too.
    ///
    /// Gauges are added as well, which is right for what each loop holds a share of
    /// (connections, devices online) and wrong for a gauge every loop reports the same
    /// process-wide value for: register those on one loop only.
    public static func merged(_ snapshots: [MetricsSnapshot]) -> MetricsSnapshot {
        var merger = Merger()
        for snapshot in snapshots { merger.add(snapshot) }
        return MetricsSnapshot(families: merger.families)
    }

    /// This snapshot merged with another; see `merged(_:)`.
    public func merging(_ other: MetricsSnapshot) -> MetricsSnapshot {
        .merged([self, other])
    }
}

extension MetricsSnapshot.Sample {
    /// The sum of two samples, or nil if they cannot be added.
    public func adding(_ other: MetricsSnapshot.Sample) -> MetricsSnapshot.Sample? {
        switch (self, other) {
        case (.value(let a), .value(let b)): .value(a + b)
        case (.histogram(let a), .histogram(let b)): a.adding(b).map { .histogram($0) }
        default: nil
        }
    }
}

private struct Merger {
    var families: [MetricsSnapshot.Family] = []
    private var familyIndex: [String: Int] = [:]
    /// Per family, series position by label string.
    private var seriesIndex: [[String: Int]] = []

    mutating func add(_ snapshot: MetricsSnapshot) {
        for family in snapshot.families {
            let index: Int
            if let known = familyIndex[family.name] {
                guard families[known].kind == family.kind, families[known].help == family.help else { continue }
                index = known
            } else {
                index = families.count
                familyIndex[family.name] = index
                families.append(MetricsSnapshot.Family(name: family.name, help: family.help, kind: family.kind, series: []))
                seriesIndex.append([:])
            }
            for series in family.series {
                if let known = seriesIndex[index][series.labels] {
                    if let sum = families[index].series[known].sample.adding(series.sample) {
                        families[index].series[known].sample = sum
                    }
                } else {
                    seriesIndex[index][series.labels] = families[index].series.count
                    families[index].series.append(series)
                }
            }
        }
    }
}
