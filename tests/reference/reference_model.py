# The published reference listing of the decision model, kept verbatim as a test
# oracle: the project's model must accept, reject and answer exactly like it.
# Not part of the package; never import it outside the tests.
"""Original offline retry-decision model. Does not submit, cancel or observe jobs."""
import json
import re
import sys


def require(condition, message):
    if not condition:
        raise ValueError(message)


def integer(value, low, high):
    return type(value) is int and low <= value <= high


def keys(value, fields):
    require(type(value) is dict and set(value) == set(fields.split()), 'Unexpected fields')


def evaluate(payload):
    keys(payload, 'asOf deadline maxObservationAge policy tasks')
    for name in ['asOf', 'deadline', 'maxObservationAge']:
        require(integer(payload[name], 0, 1000000000), 'Invalid global time')
    policy = payload['policy']
    keys(policy, 'maxAttempts initialDelay maxDelay multiplier')
    require(integer(policy['maxAttempts'], 1, 10), 'Invalid maxAttempts')
    require(integer(policy['initialDelay'], 1, 1000000), 'Invalid initialDelay')
    require(integer(policy['maxDelay'], policy['initialDelay'], 1000000), 'Invalid maxDelay')
    require(integer(policy['multiplier'], 1, 5), 'Invalid multiplier')
    tasks = payload['tasks']
    require(type(tasks) is list and 1 <= len(tasks) <= 20, 'Need 1..20 tasks')
    ids, results = set(), []
    for task in tasks:
        keys(task, 'id state safeRepeat attempts observedAt lastFinishedAt duration validation')
        identifier = task['id']
        require(type(identifier) is str and re.fullmatch(r'[A-Za-z0-9_-]{1,48}', identifier) is not None, 'Invalid task id')
        require(identifier not in ids, 'Duplicate task id')
        ids.add(identifier)
        require(task['state'] in ['running', 'unknown', 'succeeded', 'retryable', 'terminal'], 'Invalid state')
        require(type(task['safeRepeat']) is bool, 'safeRepeat must be boolean')
        require(integer(task['attempts'], 1, 10), 'Invalid attempts')
        require(integer(task['observedAt'], 0, payload['asOf']), 'Invalid observation time')
        require(integer(task['duration'], 1, 1000000), 'Invalid duration')
        require(integer(task['validation'], 0, 1000000), 'Invalid validation duration')
        ended = task['lastFinishedAt']
        if task['state'] in ['running', 'unknown']:
            require(ended is None, 'Unconfirmed completion must use null')
        else:
            require(integer(ended, 0, task['observedAt']), 'Invalid completion time')
        result = {'id': identifier, 'decision': None, 'backoff': None,
                  'earliestStart': None, 'estimatedFinish': None}
        if payload['asOf'] - task['observedAt'] > payload['maxObservationAge']:
            result['decision'] = 'refresh-observation'
        elif task['state'] == 'running':
            result['decision'] = 'observe-running'
        elif task['state'] == 'unknown':
            result['decision'] = 'reconcile-remote'
        elif task['state'] == 'succeeded':
            result['decision'] = 'validate-output'
        elif task['state'] == 'terminal':
            result['decision'] = 'repair-cause'
        elif task['attempts'] >= policy['maxAttempts']:
            result['decision'] = 'attempts-exhausted'
        elif not task['safeRepeat']:
            result['decision'] = 'reconcile-effects'
        else:
            delay = min(policy['maxDelay'], policy['initialDelay'] * policy['multiplier'] ** (task['attempts'] - 1))
            start = max(payload['asOf'], ended + delay)
            finish = start + task['duration'] + task['validation']
            result.update(backoff=delay, earliestStart=start, estimatedFinish=finish)
            if finish > payload['deadline']:
                result['decision'] = 'deadline-infeasible'
            elif start > payload['asOf']:
                result['decision'] = 'wait-backoff'
            else:
                result['decision'] = 'retry-eligible'
        results.append(result)
    return {'tasks': sorted(results, key=lambda item: item['id']),
            'deadlinePassed': payload['asOf'] > payload['deadline'],
            'jobsExecuted': False, 'idempotencyProven': False,
            'completionGuaranteed': False, 'productionApproval': False}


def main():
    raw = sys.stdin.read(1000001)
    require(len(raw) <= 1000000, 'Input too large')
    print(json.dumps(evaluate(json.loads(raw)), sort_keys=True))


if __name__ == '__main__':
    try:
        main()
    except (ValueError, TypeError, RecursionError):
        print('Invalid retry fixture', file=sys.stderr)
        sys.exit(2)
