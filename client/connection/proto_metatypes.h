// The service's messages as Qt meta-types, so that they can travel through
// queued signal connections from the gRPC threads to the GUI thread.
#pragma once

#include <QMetaType>

#include "attnscope/v1/attnscope.pb.h"

Q_DECLARE_METATYPE(attnscope::v1::FeedEvent)
Q_DECLARE_METATYPE(attnscope::v1::AnalyzeEvent)
Q_DECLARE_METATYPE(attnscope::v1::GenerateEvent)
Q_DECLARE_METATYPE(attnscope::v1::EvaluateEvictionEvent)
Q_DECLARE_METATYPE(attnscope::v1::LensEvent)
Q_DECLARE_METATYPE(attnscope::v1::PatchEvent)
Q_DECLARE_METATYPE(attnscope::v1::ListModelsResponse)

namespace attnscope::dashboard {

// Registers the types above; idempotent, call before connecting signals.
void registerProtoMetaTypes();

}  // namespace attnscope::dashboard
