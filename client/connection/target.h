// What the dashboard's --server names: one server ("host:port") or a gRPC
// target URI behind which several replicas answer ("dns:///host:port",
// "ipv4:10.0.0.1:50051,10.0.0.2:50051", "ipv6:[::1]:50051"). Requests go to
// the whole target with gRPC's round_robin; the live feed needs one
// subscription per replica, so the dashboard resolves the target itself.
#pragma once

#include <QString>
#include <QStringList>

namespace attnscope::dashboard {

// One replica behind a target.
struct Replica {
  QString label;          // what the feed and the indicator show: "10.0.0.1:50051"
  QString channelTarget;  // the gRPC target that reaches only it: "ipv4:10.0.0.1:50051"

  bool operator==(const Replica& other) const {
    return label == other.label && channelTarget == other.channelTarget;
  }
};

struct ResolvedTarget {
  QList<Replica> replicas;  // in the order given (dns: in getaddrinfo's order), no duplicates
  QString error;            // non-empty: nothing was resolved
};

// Checks the target's syntax without any lookup. Empty when usable, else a
// message naming the target and the part that is wrong. Accepted:
//   host:port and [v6]:port        one server (gRPC's default dns resolver)
//   dns:[//authority/]host:port    every address DNS returns
//   ipv4:a.b.c.d:port,...          a fixed list
//   ipv6:[addr]:port,...           a fixed list
//   unix:path, unix-abstract:name  one server on a local socket
// Ports are 1..65535.
QString checkTarget(const QString& target);

// True when the target can name more than one replica and its replicas may
// change over time (dns:), so the feed re-resolves it on every reconnect.
bool targetNeedsLookup(const QString& target);

// The replicas behind `target`. dns: targets are looked up with getaddrinfo
// (blocking: call off the GUI thread); a failed lookup is an error naming the
// host. host:port is one replica reached through the target itself (as the
// dashboard always did), so a name with IPv4 and IPv6 addresses of one server
// is not mistaken for two replicas.
ResolvedTarget resolveTarget(const QString& target);

}  // namespace attnscope::dashboard
