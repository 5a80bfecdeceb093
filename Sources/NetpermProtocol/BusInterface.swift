// SPDX-License-Identifier: LGPL-2.1-or-later

/// The bus face's introspection data: the text of data/org.netpermd.NetPerm1.xml (without its last newline), installed in
/// /usr/share/dbus-1/interfaces, which a unit test holds this copy to (BusMethodTests).
public enum BusInterface {
    public static let xml = """
<!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
<!-- SPDX-License-Identifier: LGPL-2.1-or-later -->
<!-- netpermd's system bus face, docs/DBUS.md: each method is the socket's request of docs/PROTOCOL.md, made
     for the calling process as the bus daemon identifies it, and its answer is that request's reply as D-Bus
     values (a JSON object is a{sv}, an array as, ax, ab or aa{sv}, a number x, null an absent key). -->
<node>
  <interface name="org.netpermd.NetPerm1">
    <!-- The daemon's version (STATUS's "version"). -->
    <property name="Version" type="s" access="read">
      <annotation name="org.freedesktop.DBus.Property.EmitsChangedSignal" value="const"/>
    </property>
    <!-- STATUS -->
    <method name="GetStatus">
      <arg name="status" type="a{sv}" direction="out"/>
    </method>
    <!-- LINKS: the links, sorted by index. -->
    <method name="GetLinks">
      <arg name="links" type="aa{sv}" direction="out"/>
    </method>
    <!-- QUERY: the verdict of the caller's own app. -->
    <method name="Query">
      <arg name="verdict" type="a{sv}" direction="out"/>
    </method>
    <!-- The verdict of an app of the caller's own (APPS' list), or with everyone (polkit's read-all) of any
         [App] of the policy (QUERY APP). -->
    <method name="QueryApp">
      <arg name="app" type="s" direction="in"/>
      <arg name="everyone" type="b" direction="in"/>
      <arg name="verdict" type="a{sv}" direction="out"/>
    </method>
    <!-- APPS: the caller's own apps, or with everyone (read-all) every app. -->
    <method name="GetApps">
      <arg name="everyone" type="b" direction="in"/>
      <arg name="apps" type="aa{sv}" direction="out"/>
    </method>
    <!-- USAGE [APP] ("" for all): the caller's own apps, or with everyone (read-all) every app and other traffic. -->
    <method name="GetUsage">
      <arg name="app" type="s" direction="in"/>
      <arg name="everyone" type="b" direction="in"/>
      <arg name="usage" type="a{sv}" direction="out"/>
    </method>
    <!-- PROMPTS: the caller's own processes' open prompts, or with everyone (read-all) all. -->
    <method name="GetPrompts">
      <arg name="everyone" type="b" direction="in"/>
      <arg name="prompts" type="aa{sv}" direction="out"/>
    </method>
    <!-- DECISIONS: the caller's own, or with everyone (read-all) all. -->
    <method name="GetDecisions">
      <arg name="everyone" type="b" direction="in"/>
      <arg name="decisions" type="aa{sv}" direction="out"/>
    </method>
    <!-- REPORT [APP] ("" for all): the privacy report (docs/PRIVACY.md) of the caller's own apps, or with everyone
         (read-all) of every app; the reply's members are the socket's, as they are. -->
    <method name="GetReport">
      <arg name="app" type="s" direction="in"/>
      <arg name="everyone" type="b" direction="in"/>
      <arg name="report" type="a{sv}" direction="out"/>
    </method>
    <!-- SUBSCRIBE TOPIC...: the caller's own events from now on, as unicast signals to its unique name alone
         (AppChanged, PromptChanged, UsageReached, Snapshot, Unsubscribed): topics of apps, mine, self, usage and
         prompts (prompts: the caller is an agent, as on the socket), as the caller's uid sees them, or with
         everyone (read-all) as everyone has them. Its answer is SUBSCRIBE's acknowledgement; a Snapshot follows.
         Subscribing again replaces the subscription; it ends with Unsubscribe or when the caller leaves the bus. -->
    <method name="Subscribe">
      <arg name="topics" type="as" direction="in"/>
      <arg name="everyone" type="b" direction="in"/>
      <arg name="subscribed" type="a{sv}" direction="out"/>
    </method>
    <!-- Ends the caller's subscription (none: nothing). -->
    <method name="Unsubscribe">
      <arg name="result" type="a{sv}" direction="out"/>
    </method>
    <!-- A link was added, changed or removed ("link" event): change is added, changed or removed. -->
    <signal name="LinkChanged">
      <arg name="change" type="s"/>
      <arg name="link" type="a{sv}"/>
    </signal>
    <!-- Verdicts changed ("app" events): call GetApps or Query again for those you show. -->
    <signal name="AppsChanged"/>
    <!-- A policy load succeeded or failed ("policy" event): generation, apps, error. -->
    <signal name="PolicyChanged">
      <arg name="policy" type="a{sv}"/>
    </signal>
    <!-- A budget reached 80% or 100% ("usage" event): call GetUsage again. -->
    <signal name="UsageChanged"/>
    <!-- A prompt was raised, answered, expired or withdrawn ("prompt..." events): call GetPrompts again. -->
    <signal name="PromptsChanged"/>
    <!-- To a subscriber alone: an app's verdict changed ("app" event: the verdict as in Query, without matched_by
         and identity; seq counts the subscription's events). -->
    <signal name="AppChanged">
      <arg name="verdict" type="a{sv}"/>
    </signal>
    <!-- To a subscriber alone: a prompt was raised, answered, expired or withdrawn; change is the event's name
         (prompt, prompt-answered, prompt-expired, prompt-withdrawn), prompt its body. -->
    <signal name="PromptChanged">
      <arg name="change" type="s"/>
      <arg name="prompt" type="a{sv}"/>
    </signal>
    <!-- To a subscriber alone: a budget reached 80% or 100% ("usage" event: app, percent, budget). -->
    <signal name="UsageReached">
      <arg name="usage" type="a{sv}"/>
    </signal>
    <!-- To a subscriber alone: the whole state of its topics, after Subscribe (why: snapshot) or after a resync
         (why: listed, fell-behind, netlink-overrun): apps, prompts as the snapshot and resync events have them. -->
    <signal name="Snapshot">
      <arg name="why" type="s"/>
      <arg name="state" type="a{sv}"/>
    </signal>
    <!-- To a subscriber alone: a reload took topics off its subscription (topics, error, message). -->
    <signal name="Unsubscribed">
      <arg name="unsubscribed" type="a{sv}"/>
    </signal>
  </interface>
  <interface name="org.netpermd.NetPerm1.Decisions">
    <!-- DECIDE APP KIND allow|deny [--once]: for the caller's own processes (polkit's decide-own), or with
         everyone for everyone (manage). -->
    <method name="Decide">
      <arg name="app" type="s" direction="in"/>
      <arg name="kind" type="s" direction="in"/>
      <arg name="decision" type="s" direction="in"/>
      <arg name="once" type="b" direction="in"/>
      <arg name="everyone" type="b" direction="in"/>
      <arg name="result" type="a{sv}" direction="out"/>
    </method>
    <!-- FORGET APP [KIND] ("" for every kind): the caller's own (decide-own), or with everyone everyone's (manage). -->
    <method name="Forget">
      <arg name="app" type="s" direction="in"/>
      <arg name="kind" type="s" direction="in"/>
      <arg name="everyone" type="b" direction="in"/>
      <arg name="result" type="a{sv}" direction="out"/>
    </method>
    <!-- ANSWER ID allow|deny|once|dismiss [--everyone]: a prompt of the caller's own processes (decide-own), or
         with everyone any prompt, for everyone (manage). -->
    <method name="Answer">
      <arg name="id" type="u" direction="in"/>
      <arg name="choice" type="s" direction="in"/>
      <arg name="everyone" type="b" direction="in"/>
      <arg name="result" type="a{sv}" direction="out"/>
    </method>
    <!-- RESET-REPORT [APP] ("" for all): clears the caller's own apps' report (decide-own), or with everyone any
         app's (manage). -->
    <method name="ResetReport">
      <arg name="app" type="s" direction="in"/>
      <arg name="everyone" type="b" direction="in"/>
      <arg name="result" type="a{sv}" direction="out"/>
    </method>
    <!-- KEEP-REPORT yes|no: the caller's own apps recorded in the report or not; off deletes what was kept
         (decide-own). -->
    <method name="KeepReport">
      <arg name="keep" type="b" direction="in"/>
      <arg name="result" type="a{sv}" direction="out"/>
    </method>
    <!-- RELOAD (manage). -->
    <method name="Reload">
      <arg name="result" type="a{sv}" direction="out"/>
    </method>
  </interface>
</node>
"""

    /// What Introspect answers: the interfaces above, and the standard ones sd-bus serves on every object.
    public static var introspection: String {
        let standard = """
          <interface name="org.freedesktop.DBus.Peer">
            <method name="Ping"/>
            <method name="GetMachineId"><arg name="machine_uuid" type="s" direction="out"/></method>
          </interface>
          <interface name="org.freedesktop.DBus.Introspectable">
            <method name="Introspect"><arg name="xml_data" type="s" direction="out"/></method>
          </interface>
          <interface name="org.freedesktop.DBus.Properties">
            <method name="Get"><arg name="interface_name" type="s" direction="in"/><arg name="property_name" type="s" direction="in"/><arg name="value" type="v" direction="out"/></method>
            <method name="GetAll"><arg name="interface_name" type="s" direction="in"/><arg name="props" type="a{sv}" direction="out"/></method>
            <method name="Set"><arg name="interface_name" type="s" direction="in"/><arg name="property_name" type="s" direction="in"/><arg name="value" type="v" direction="in"/></method>
            <signal name="PropertiesChanged"><arg name="interface_name" type="s"/><arg name="changed_properties" type="a{sv}"/><arg name="invalidated_properties" type="as"/></signal>
          </interface>

        """
        let end = "</node>"
        guard xml.hasSuffix(end) else { return xml }
        return String(xml.dropLast(end.count)) + standard + end
    }
}
