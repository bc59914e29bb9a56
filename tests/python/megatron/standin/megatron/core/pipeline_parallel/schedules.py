"""Stand-in for megatron/core/pipeline_parallel/schedules.py (Megatron-LM main): the schedule without pipeline
parallelism and the loss path of one micro-batch, from the facts of the real functions:
  - forward_backward_no_pipelining takes its arguments by keyword only; it runs num_microbatches micro-batches
    (forward_step then backward), sums the token counts, then calls config.finalize_model_grads_func (the DP
    gradient reduction), passing the summed token count when config.calculate_per_token_loss;
  - forward_step_calc_loss: a loss_func returning 3 values (loss, num_tokens, report) has its loss divided by
    max(num_tokens, 1) and by num_microbatches unless calculate_per_token_loss; 2 values (loss, report), the
    legacy path: multiplied by the CP size and divided by num_microbatches; the report is what the schedule
    returns, one per micro-batch.
No Megatron code."""
import torch


def forward_step_calc_loss(model, output_tensor, loss_func, config, vp_stage, collect_non_loss_data,
                           num_microbatches, forward_data_store, cp_group_size=None, is_last_stage=None):
    num_tokens = torch.tensor(0, dtype=torch.int)
    outputs = loss_func(output_tensor)
    if len(outputs) == 3:
        output_tensor, num_tokens, loss_reduced = outputs
        if not config.calculate_per_token_loss:
            output_tensor /= torch.clamp(num_tokens, min=1)
            output_tensor /= num_microbatches
    else:
        assert len(outputs) == 2
        output_tensor, loss_reduced = outputs
        output_tensor *= cp_group_size if cp_group_size is not None else 1
        output_tensor /= num_microbatches
    forward_data_store.append(loss_reduced)
    return output_tensor, num_tokens


def forward_backward_no_pipelining(*, forward_step_func, data_iterator, model, num_microbatches, seq_length,
                                   micro_batch_size, decoder_seq_length=None, forward_only=False,
                                   collect_non_loss_data=False, first_val_step=None, adjust_tensor_shapes_fn=None,
                                   p2p_communicator=None, pg_collection=None, force_all_reduce=False):
    if isinstance(model, list):
        assert len(model) == 1
        model = model[0]
    config = model.config
    forward_data_store = []
    total_num_tokens = torch.zeros([], dtype=torch.int)
    for _ in range(num_microbatches):
        output_tensor, loss_func = forward_step_func(data_iterator, model)
        output_tensor, num_tokens = forward_step_calc_loss(model, output_tensor, loss_func, config, None,
                                                           collect_non_loss_data, num_microbatches,
                                                           forward_data_store, 1, True)
        total_num_tokens += num_tokens
        if not forward_only:
            output_tensor.backward()
    if config.finalize_model_grads_func is not None and not forward_only:
        config.finalize_model_grads_func([model], total_num_tokens if config.calculate_per_token_loss else None)
    return forward_data_store


def get_forward_backward_func(schedule_pg_collection=None):
    return forward_backward_no_pipelining
