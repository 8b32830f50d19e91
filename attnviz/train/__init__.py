def warmup_cosine(optimizer, warmup: int, steps: int):
    """The learning-rate schedule both shipped recipes use: linear warm-up over `warmup` steps, then a cosine
    decay to 0 at `steps`."""
    import math

    import torch

    def factor(step: int) -> float:
        return min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * step / steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
