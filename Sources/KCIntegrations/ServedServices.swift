import Keyrings

/// Which service each unit's credentials come from in `kc credential-server`: the
/// unit's own (`--unit-service UNIT=SERVICE`), else the default (`--service`).
public struct ServedServices: Sendable {
    public var fallback: KeyName?
    public var units: [String: KeyName]

    public init(fallback: KeyName?, units: [String: KeyName]) {
        self.fallback = fallback
        self.units = units
    }

    /// The service `unit` is served from; nil if none is.
    public func service(for unit: String) -> KeyName? { units[unit] ?? fallback }
}
