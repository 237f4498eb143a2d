-- Argo CD health check for kpo's kinds (PartitionReassignment, PreferredLeaderElection, TopicPartitionCount).
--
-- kpo writes kstatus conditions with observedGeneration: Ready is True only at success, Progressing while kpo works,
-- Stalled when it cannot go on without the user. This script maps them onto Argo CD's health states:
--   Healthy      Ready=True for the current generation
--   Degraded     Stalled=True (Invalid, Failed, or waiting on a conflict)
--   Suspended    a stopped reassignment (phase Stopped or Reverted), a paused one (Paused: execution.paused, the
--                moves in flight run out but no new one starts) or a plan waiting for approval (Proposed): it rests
--                where the user put it, neither broken nor busy
--   Progressing  everything else: not reconciled yet, an older generation, or work in progress
--
-- Install it in argocd-cm under resource.customizations.health.kpo.dev_<Kind> for each kind (see docs/operating.md).
local hs = {}

local function condition(conditions, kind)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local generation = nil
if obj.metadata ~= nil then
  generation = obj.metadata.generation
end

if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for kpo to reconcile this resource"
  return hs
end

local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for kpo to observe generation " .. tostring(generation)
  return hs
end

local conditions = obj.status.conditions
local ready = condition(conditions, "Ready")
local stalled = condition(conditions, "Stalled")
local progressing = condition(conditions, "Progressing")

-- A condition written for an older generation says nothing about the current spec.
local function current(c)
  return c ~= nil and (generation == nil or c.observedGeneration == nil or c.observedGeneration >= generation)
end

local function message(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return fallback
end

local phase = obj.status.phase or ""

if current(stalled) and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = phase .. ": " .. message(stalled, "stalled")
  return hs
end
if current(ready) and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = message(ready, phase)
  return hs
end
if current(progressing) and progressing.status == "True" then
  hs.status = "Progressing"
  hs.message = message(progressing, phase)
  return hs
end
if phase == "Stopped" or phase == "Reverted" or phase == "Proposed" or phase == "Paused" then
  hs.status = "Suspended"
  hs.message = phase .. ": " .. message(ready, "waiting for the user")
  return hs
end
hs.status = "Progressing"
hs.message = message(ready, "Waiting for kpo")
return hs
