extension SecretService {
    /// The introspection XML of an object: its interfaces, and its children as nodes.
    func introspection(of object: Object) throws(BusError) -> String {
        var xml = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>
        \(Self.standardInterfaces)
        """
        switch object {
        case .service:
            xml += Self.serviceXML
            xml += "  <node name=\"collection\"/>\n  <node name=\"aliases\"/>\n"
        case .collection(let name):
            xml += Self.collectionXML
            if !store.isLocked(collection: name) || store.index != nil {
                for item in try store.items(in: name, matching: [:]) {
                    xml += "  <node name=\"\(itemPath(item).split(separator: "/").last ?? "")\"/>\n"
                }
            }
        case .item:
            xml += Self.itemXML
        case .session:
            xml += "  <interface name=\"\(Self.sessionInterface)\">\n    <method name=\"Close\"/>\n  </interface>\n"
        case .prompt:
            xml += Self.promptXML
        case .folder(let name):
            let children = name == "aliases" ? (store.index?.aliases.keys.sorted() ?? ["default"]) : store.collectionNames
            // Names are checked when made (``SecretLimits/checkAlias(_:)``); an index an
            // older kc-secretd saved may hold others, escaped here.
            for child in children { xml += "  <node name=\"\(Self.xmlEscaped(child))\"/>\n" }
        }
        return xml + "</node>\n"
    }

    private static let standardInterfaces = """
      <interface name="org.freedesktop.DBus.Introspectable">
        <method name="Introspect"><arg name="xml" type="s" direction="out"/></method>
      </interface>
      <interface name="org.freedesktop.DBus.Peer">
        <method name="Ping"/>
        <method name="GetMachineId"><arg name="machine_uuid" type="s" direction="out"/></method>
      </interface>
      <interface name="org.freedesktop.DBus.Properties">
        <method name="Get"><arg name="interface" type="s" direction="in"/><arg name="property" type="s" direction="in"/><arg name="value" type="v" direction="out"/></method>
        <method name="GetAll"><arg name="interface" type="s" direction="in"/><arg name="properties" type="a{sv}" direction="out"/></method>
        <method name="Set"><arg name="interface" type="s" direction="in"/><arg name="property" type="s" direction="in"/><arg name="value" type="v" direction="in"/></method>
        <signal name="PropertiesChanged"><arg name="interface" type="s"/><arg name="changed" type="a{sv}"/><arg name="invalidated" type="as"/></signal>
      </interface>

    """

    private static let serviceXML = """
      <interface name="org.freedesktop.Secret.Service">
        <method name="OpenSession"><arg name="algorithm" type="s" direction="in"/><arg name="input" type="v" direction="in"/><arg name="output" type="v" direction="out"/><arg name="result" type="o" direction="out"/></method>
        <method name="CreateCollection"><arg name="properties" type="a{sv}" direction="in"/><arg name="alias" type="s" direction="in"/><arg name="collection" type="o" direction="out"/><arg name="prompt" type="o" direction="out"/></method>
        <method name="SearchItems"><arg name="attributes" type="a{ss}" direction="in"/><arg name="unlocked" type="ao" direction="out"/><arg name="locked" type="ao" direction="out"/></method>
        <method name="Unlock"><arg name="objects" type="ao" direction="in"/><arg name="unlocked" type="ao" direction="out"/><arg name="prompt" type="o" direction="out"/></method>
        <method name="Lock"><arg name="objects" type="ao" direction="in"/><arg name="locked" type="ao" direction="out"/><arg name="Prompt" type="o" direction="out"/></method>
        <method name="GetSecrets"><arg name="items" type="ao" direction="in"/><arg name="session" type="o" direction="in"/><arg name="secrets" type="a{o(oayays)}" direction="out"/></method>
        <method name="ReadAlias"><arg name="name" type="s" direction="in"/><arg name="collection" type="o" direction="out"/></method>
        <method name="SetAlias"><arg name="name" type="s" direction="in"/><arg name="collection" type="o" direction="in"/></method>
        <signal name="CollectionCreated"><arg name="collection" type="o"/></signal>
        <signal name="CollectionDeleted"><arg name="collection" type="o"/></signal>
        <signal name="CollectionChanged"><arg name="collection" type="o"/></signal>
        <property name="Collections" type="ao" access="read"/>
      </interface>

    """

    private static let collectionXML = """
      <interface name="org.freedesktop.Secret.Collection">
        <method name="Delete"><arg name="prompt" type="o" direction="out"/></method>
        <method name="SearchItems"><arg name="attributes" type="a{ss}" direction="in"/><arg name="results" type="ao" direction="out"/></method>
        <method name="CreateItem"><arg name="properties" type="a{sv}" direction="in"/><arg name="secret" type="(oayays)" direction="in"/><arg name="replace" type="b" direction="in"/><arg name="item" type="o" direction="out"/><arg name="prompt" type="o" direction="out"/></method>
        <signal name="ItemCreated"><arg name="item" type="o"/></signal>
        <signal name="ItemDeleted"><arg name="item" type="o"/></signal>
        <signal name="ItemChanged"><arg name="item" type="o"/></signal>
        <property name="Items" type="ao" access="read"/>
        <property name="Label" type="s" access="readwrite"/>
        <property name="Locked" type="b" access="read"/>
        <property name="Created" type="t" access="read"/>
        <property name="Modified" type="t" access="read"/>
      </interface>

    """

    private static let itemXML = """
      <interface name="org.freedesktop.Secret.Item">
        <method name="Delete"><arg name="Prompt" type="o" direction="out"/></method>
        <method name="GetSecret"><arg name="session" type="o" direction="in"/><arg name="secret" type="(oayays)" direction="out"/></method>
        <method name="SetSecret"><arg name="secret" type="(oayays)" direction="in"/></method>
        <property name="Locked" type="b" access="read"/>
        <property name="Attributes" type="a{ss}" access="readwrite"/>
        <property name="Label" type="s" access="readwrite"/>
        <property name="Type" type="s" access="read"/>
        <property name="Created" type="t" access="read"/>
        <property name="Modified" type="t" access="read"/>
      </interface>

    """

    private static let promptXML = """
      <interface name="org.freedesktop.Secret.Prompt">
        <method name="Prompt"><arg name="window-id" type="s" direction="in"/></method>
        <method name="Dismiss"/>
        <signal name="Completed"><arg name="dismissed" type="b"/><arg name="result" type="v"/></signal>
      </interface>

    """

    /// `text` as an XML attribute value: `&`, `<`, `>`, `"` and `'` as entities, and
    /// control characters (which XML 1.0 cannot hold) as `?`.
    static func xmlEscaped(_ text: String) -> String {
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&apos;"
            case _ where scalar.value < 0x20 || scalar.value == 0x7f: escaped += "?"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }
}
